"""RQ behind one door: only pipeline/broker.py knows RQ's insides (its internal modules, its
Redis keys and the fields of its hashes); the worker classes (pipeline/rq_workers.py)
extend RQ's public ones; no other module of the apps imports RQ at all."""

import ast
from pathlib import Path

from tests.support.processes import ROOT

APPS = ("config", "web", "api", "operations", "connectors", "pipeline", "retrieval")
APPS += ("documents", "formats", "core")
DOOR = ROOT / "pipeline" / "broker.py"
WORKER_CLASSES = ROOT / "pipeline" / "rq_workers.py"
# RQ's modules that hold its keys, registries and job internals.
INTERNAL = (
    "rq.registry",
    "rq.intermediate_queue",
    "rq.timeouts",
    "rq.job",
    "rq.worker_registration",
    "rq.suspension",
    "rq.scheduler",
    "rq.utils",
    "rq.queue",
)
# How RQ's keys, and the fields of its job and worker hashes, are spelled or found.
KEY_SPELLINGS = (
    '"current_job"',
    '"worker_name"',
    '"enqueued_at"',
    '"origin"',
    '"last_heartbeat"',
    "rq:job:",
    "rq:queue:",
    "rq:worker",
    "rq:wip:",
    "rq:scheduled:",
    "rq:suspended",
    "redis_job_namespace_prefix",
    "redis_queue_namespace_prefix",
    "redis_worker_namespace_prefix",
    "key_template",
)


def modules() -> list[Path]:
    return [
        path
        for app in APPS
        if (ROOT / app).is_dir()
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts
    ]


def rq_imports(source: str) -> set[str]:
    """The RQ modules a source imports (`rq` for `from rq import X` or `import rq`)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name == "rq" or a.name.startswith("rq.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "rq" or node.module.startswith("rq."):
                found.add(node.module)
    return found


def offences(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        if path == DOOR:
            continue
        source = path.read_text()
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
        imported = rq_imports(source)
        if path != WORKER_CLASSES and imported:
            found.append(f"{name} imports {sorted(imported)}")
        elif internal := sorted(m for m in imported if m.startswith(INTERNAL)):
            found.append(f"{name} imports RQ's insides {internal}")
        found += [f"{name} spells {s!r}" for s in KEY_SPELLINGS if s in source]
    return found


def test_only_the_broker_knows_rqs_insides():
    assert offences(modules()) == []


def test_an_import_of_rqs_registries_or_a_key_elsewhere_is_found(tmp_path):
    stray = tmp_path / "sweeper.py"
    stray.write_text("from rq.registry import StartedJobRegistry\nkey = 'rq:job:' + 'x'\n")

    assert offences([stray]) == [
        "sweeper.py imports ['rq.registry']",
        "sweeper.py spells 'rq:job:'",
    ]
