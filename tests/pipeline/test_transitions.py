"""The table of a run's moves: every move it allows works from every status it names,
every other move from every other status raises and changes nothing, and nothing but
the transitions module sets a run's status or stage."""

import ast
from pathlib import Path

import pytest
from django.db import transaction

from documents.models import QuotaReservation
from pipeline.models import ImportRun, RunSource, RunStatus, RunTransition, Stage
from pipeline.services.transitions import (
    CLAIMED_TO,
    MOVES,
    Actor,
    DisallowedMove,
    completion_changes,
    run_begin,
    run_move,
)
from pipeline.stage_list import SOURCE_STAGES, first_stage, next_stage, resume_stage
from tests.support.files import make_pdf
from tests.support.processes import ROOT
from tests.support.runs import unchecked_run

pytestmark = pytest.mark.django_db(transaction=True)

ACTOR = Actor("user:alice")
ENDED_WITHOUT_SUCCESS = {RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.CANCELLED}
# A stage each move can be made from (advance needs one with a stage after it).
FROM_STAGE = {"advance": Stage.EXTRACT, "succeed": Stage.SETTLE, "reembed": Stage.SETTLE}


def run_in(org, status: str, stage: str) -> ImportRun:
    run = unchecked_run(org, make_pdf(1), kind="pdf", pages=1)
    ImportRun.objects.filter(id=run.id).update(status=status, stage=stage)
    return ImportRun.objects.select_related("reservation").get(id=run.id)


def move(run: ImportRun, name: str) -> tuple[ImportRun, list]:
    """Make the move in a transaction; the deliveries it left for after the commit."""
    with transaction.atomic():
        run_move(run=run, move=name, actor=ACTOR, reason=f"test {name}")
        delivered = list(transaction.get_connection().run_on_commit)
    return ImportRun.objects.select_related("reservation").get(id=run.id), delivered


# In a fixed order (a rule's statuses are a set): every pytest-xdist worker must collect
# the same tests.
ALLOWED = [
    (name, status)
    for name, rule in MOVES.items()
    if name != "begin"
    for status in sorted(rule.leaves)
]


@pytest.mark.parametrize(("name", "status"), ALLOWED, ids=[f"{n}-{s}" for n, s in ALLOWED])
def test_every_allowed_move_works_and_is_recorded(org, name, status):
    stage = FROM_STAGE.get(name, Stage.EMBED)
    run = run_in(org, status, stage)
    held = run.reservation.status == QuotaReservation.Status.HELD
    generation, rule = run.generation, MOVES[name]

    after, delivered = move(run, name)

    expected_stage = {
        "same": stage,
        "next": next_stage(stage, source=run.source),
        "resume": resume_stage(stage, source=run.source),
    }.get(rule.stage, rule.stage)
    assert (after.status, after.stage) == (rule.to or status, expected_stage)
    last = RunTransition.objects.filter(run=run).latest("id")
    assert (last.from_status, last.to_status) == (status, after.status)
    assert (last.from_stage, last.to_stage, last.actor_label) == (stage, after.stage, ACTOR.label)
    if after.status in ENDED_WITHOUT_SUCCESS:
        assert held and after.reservation.status == QuotaReservation.Status.RELEASED
        assert after.finished_at is not None and after.due_at is None
    if after.status == RunStatus.QUEUED:
        assert len(delivered) == 1  # enqueued once the move commits
    if status not in {RunStatus.QUEUED, RunStatus.PROCESSING} and after.status == "queued":
        assert after.generation == generation + 1  # deliveries get new job ids


DISALLOWED = [
    (name, status)
    for name, rule in MOVES.items()
    if name != "begin"
    for status in RunStatus.values
    if status not in rule.leaves
]


@pytest.mark.parametrize(("name", "status"), DISALLOWED, ids=[f"{n}-{s}" for n, s in DISALLOWED])
def test_every_other_move_raises_and_changes_nothing(org, name, status):
    run = run_in(org, status, FROM_STAGE.get(name, Stage.EMBED))
    before = RunTransition.objects.filter(run=run).count()

    with pytest.raises(DisallowedMove):
        move(run, name)

    after = ImportRun.objects.get(id=run.id)
    assert (after.status, after.stage) == (run.status, run.stage)
    assert RunTransition.objects.filter(run=run).count() == before


# The run's life as the design draws it: from -> to, every status change there is.
STATUS_CHANGES = {
    ("", "queued"),
    ("queued", "processing"),
    ("queued", "dead_letter"),
    ("queued", "cancelled"),
    ("processing", "succeeded"),
    ("processing", "failed"),
    ("processing", "dead_letter"),
    ("processing", "cancelled"),
    ("failed", "queued"),
    ("dead_letter", "queued"),
    ("cancelled", "queued"),
    ("succeeded", "queued"),  # a connected file back at its source: re-embedded
}


def test_the_table_allows_the_status_changes_of_the_design_and_no_other():
    changes = {
        (status, rule.to)
        for rule in MOVES.values()
        for status in rule.leaves
        if rule.to is not None and rule.to != status
    }

    assert changes == STATUS_CHANGES
    # The one move back from success goes to embed alone, never to extract or settle.
    assert [m.stage for m in MOVES.values() if RunStatus.SUCCEEDED in m.leaves] == [Stage.EMBED]


def test_a_run_cannot_advance_past_its_sources_last_stage(org):
    run = run_in(org, RunStatus.PROCESSING, Stage.SETTLE)

    with pytest.raises(DisallowedMove):
        move(run, "advance")


def test_an_upload_at_a_stage_uploads_skip_cannot_advance(org):
    run = run_in(org, RunStatus.PROCESSING, Stage.CREATE)

    with pytest.raises(DisallowedMove, match="does not go through create"):
        move(run, "advance")


def test_a_new_run_is_due_at_its_sources_first_stage(org):
    for source, stages in SOURCE_STAGES.items():
        reservation = QuotaReservation.objects.create(organisation=org, pages=0)
        run, first = run_begin(
            actor=ACTOR, reason="found", organisation=org, reservation=reservation, source=source
        )
        assert (run.status, run.stage, run.due_at is not None) == ("queued", stages[0], True)
        assert (first.from_status, first.to_status, first.to_stage) == ("", "queued", stages[0])


def test_the_claim_and_the_completion_make_the_tables_moves(org):
    run = run_in(org, RunStatus.PROCESSING, Stage.EMBED)

    assert CLAIMED_TO == MOVES["claim"].to == RunStatus.PROCESSING
    move_name, changes = completion_changes(run, now=None)
    assert (move_name, changes["status"], changes["stage"]) == ("advance", "processing", "settle")
    run.stage = Stage.SETTLE
    move_name, changes = completion_changes(run, now=None)
    assert (move_name, changes["status"]) == ("succeed", "succeeded") and "stage" not in changes
    assert first_stage(RunSource.CONNECTOR) == Stage.CREATE


# --- Nothing else sets a run's status or stage ---------------------------------------

# The one module that may, and the other objects whose `status` code sets (not runs).
TRANSITIONS = "pipeline/services/transitions.py"
NOT_RUNS = {
    ("connectors/status.py", "connection"),  # a Connection (its own table of moves)
    ("documents/services/quota.py", "reservation"),  # a QuotaReservation
    ("pipeline/logcontext.py", "record"),  # a log record's fields
}
APPS = ("web", "api", "operations", "connectors", "pipeline", "retrieval", "documents", "formats")
APPS += ("core",)


def run_field_writes(path: Path, source: str) -> list[str]:
    """Where `source` sets a `status` or `stage`: as an attribute, as a keyword of a call
    that writes rows (update, create, a model's constructor, get_or_create's defaults),
    or as a key of a dict of changes."""
    found = []
    relative = str(path.relative_to(ROOT))
    for node in ast.walk(ast.parse(source)):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for item in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(item, ast.Attribute) and item.attr in ("status", "stage"):
                    owner = item.value.id if isinstance(item.value, ast.Name) else ""
                    if (relative, owner) not in NOT_RUNS:
                        found.append(f"{relative}:{node.lineno} sets {owner}.{item.attr}")
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            called = called or (node.func.id if isinstance(node.func, ast.Name) else "")
            if called in ("update", "create", "ImportRun", "update_or_create", "bulk_create"):
                for keyword in node.keywords:
                    if keyword.arg in ("status", "stage") and _is_run_status(keyword.value):
                        found.append(f"{relative}:{node.lineno} writes {keyword.arg}= in {called}")
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in ("status", "stage"):
                    if _is_run_status(value):
                        found.append(f"{relative}:{node.lineno} puts {key.value!r} in a dict")
    return found


def _is_run_status(value: ast.expr) -> bool:
    """A value written as a run's status or stage: RunStatus.X, Stage.X, or their text."""
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        return value.value.id in ("RunStatus", "Stage", "Status") and value.attr.isupper()
    if isinstance(value, ast.Constant):
        return value.value in (*RunStatus.values, *Stage.values)
    return False


def test_only_the_transitions_module_sets_a_runs_status_or_stage():
    writes = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts or str(path.relative_to(ROOT)) == TRANSITIONS:
                continue
            writes += run_field_writes(path, path.read_text())

    assert writes == []


def test_the_lint_finds_a_status_set_by_hand():
    here = ROOT / "pipeline" / "services" / "example.py"
    by_hand = """
run.status = RunStatus.FAILED
run.status, run.finished_at = RunStatus.CANCELLED, now
ImportRun.objects.filter(id=run_id).update(status=RunStatus.QUEUED)
ImportRun.objects.create(organisation=org, stage=Stage.EMBED)
changes = {"status": RunStatus.SUCCEEDED}
ImportRun.objects.filter(id=run_id).update(status="queued")
"""
    assert len(run_field_writes(here, by_hand)) == 6
    assert run_field_writes(here, "runs = ImportRun.objects.filter(status=RunStatus.QUEUED)") == []
