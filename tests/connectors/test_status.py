"""The table of a connection's moves: every move it allows works from every status it
names and is recorded, every other move raises and changes nothing, and nothing but
connectors/status.py sets a connection's status."""

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import transaction

from connectors.models import Connection, ConnectionEvent
from connectors.status import MOVES, DisallowedConnectionMove, connection_move
from core.errors import Conflict
from pipeline.services.transitions import Actor
from tests.support.processes import ROOT

pytestmark = pytest.mark.django_db

ACTOR = Actor("user:alice")
STATUSES = ["", *Connection.Status.values]  # "": a connection being made
Action = ConnectionEvent.Action


def connection_in(org, status: str) -> Connection:
    """A connection in `status`, its row locked by the test's transaction; not saved for ""."""
    fields = {"organisation": org, "provider": "local", "folder_id": "/srv/scans"}
    if not status:
        return Connection(**fields, folder_path="/srv/scans")
    made = Connection.objects.create(**fields, folder_path="/srv/scans", status=status)
    return Connection.objects.select_for_update().get(id=made.id)


# In a fixed order (a rule's statuses are a set): every pytest-xdist worker must collect
# the same tests.
ALLOWED = [(name, status) for name, rule in MOVES.items() for status in sorted(rule.leaves)]
DISALLOWED = [
    (name, status)
    for name, rule in MOVES.items()
    for status in STATUSES
    if status not in rule.leaves
]


@pytest.mark.parametrize(("name", "status"), ALLOWED, ids=[f"{n}-{s or 'new'}" for n, s in ALLOWED])
def test_every_allowed_move_works_and_is_recorded(org, name, status):
    rule = MOVES[name]
    with transaction.atomic():
        connection = connection_in(org, status)
        event = connection_move(
            connection=connection, move=name, actor=ACTOR, reason=f"test {name}"
        )

    after = Connection.objects.get(id=connection.id)
    assert (after.status, after.status_reason) == (rule.to, f"test {name}")
    events = list(ConnectionEvent.objects.filter(connection=after))
    if rule.action == Action.SYNC and status == rule.to:
        # An errored connection failing again: its reason is new, its status is not.
        assert event is None and events == []
        return
    assert events == [event]
    assert (event.action, event.status_before, event.status_after) == (rule.action, status, rule.to)
    assert (event.actor, event.reason) == (ACTOR.label, f"test {name}")


@pytest.mark.parametrize(
    ("name", "status"), DISALLOWED, ids=[f"{n}-{s or 'new'}" for n, s in DISALLOWED]
)
def test_every_other_move_raises_and_changes_nothing(org, name, status):
    with transaction.atomic():
        connection = connection_in(org, status)
        with pytest.raises(DisallowedConnectionMove) as refused:
            connection_move(connection=connection, move=name, actor=ACTOR, reason="no")

    assert isinstance(refused.value, Conflict) and refused.value.status_code == 409
    assert not ConnectionEvent.objects.exists()
    if not status:
        assert not Connection.objects.exists()
    else:
        after = Connection.objects.get(id=connection.id)
        assert (after.status, after.status_reason) == (status, "")


# A connection's life: from -> to, every status change there is ("" is being made).
STATUS_CHANGES = {
    ("", "active"),
    # Connected again (OneDrive: new tokens, whatever it was in).
    ("paused", "active"),
    ("needs_reconnect", "active"),
    ("error", "active"),
    ("disconnected", "active"),
    # Paused by a person, or by a sync that gave up.
    ("active", "paused"),
    ("error", "paused"),
    ("needs_reconnect", "paused"),
    # What syncs meet.
    ("active", "error"),
    ("active", "needs_reconnect"),
    ("error", "needs_reconnect"),
    # Disconnected from anything but disconnected.
    ("active", "disconnected"),
    ("paused", "disconnected"),
    ("needs_reconnect", "disconnected"),
    ("error", "disconnected"),
}


def test_the_table_allows_the_status_changes_of_the_design_and_no_other():
    changes = {
        (status, rule.to) for rule in MOVES.values() for status in rule.leaves if status != rule.to
    }

    assert changes == STATUS_CHANGES
    # Only syncs leave a status as it was (and write no history then); a person's move
    # always records who made it.
    assert {rule.name for rule in MOVES.values() if rule.to in rule.leaves} == {
        "reconnect",
        "fail",
    }
    # A new connection is in the status `connect` leads to from its first insert.
    assert Connection._meta.get_field("status").default == MOVES["connect"].to


# --- Nothing else sets a connection's status ------------------------------------------

STATUS_MODULE = "connectors/status.py"
APPS = ("web", "api", "operations", "connectors", "pipeline", "retrieval", "documents", "core")
FIELDS = ("status", "status_reason")
WRITES = ("update", "create", "get_or_create", "update_or_create", "bulk_create", "Connection")
RAW_UPDATE = re.compile(r"UPDATE\s+\W?documents_connection\W?\s+SET\b.*\bstatus", re.I | re.S)


def connection_status_writes(path: Path, source: str) -> list[str]:
    """Where `source` sets a connection's status or its reason: as an attribute (setattr
    too), as a keyword (or a `defaults` key) of a call that writes rows, as a key of a
    dict of changes, or in raw SQL. In the connectors app every `status` is a
    connection's (runs move through run_move, imports have a `state`); elsewhere, one
    of a name that says connection, of a Connection query, or set to Connection.Status.
    One finding a line."""
    relative = str(path.relative_to(ROOT))
    everywhere = relative.startswith("connectors/")
    found: dict[int, str] = {}
    for node in ast.walk(ast.parse(source)):
        for what in _writes(node, everywhere=everywhere):
            found.setdefault(node.lineno, f"{relative}:{node.lineno} {what}")
    return list(found.values())


def _writes(node: ast.AST, *, everywhere: bool) -> Iterator[str]:
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            for item in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(item, ast.Attribute) and item.attr in FIELDS:
                    if everywhere or _says_connection(item.value):
                        yield f"sets .{item.attr}"
    elif isinstance(node, ast.Call):
        yield from _call_writes(node, everywhere=everywhere)
    elif isinstance(node, ast.Dict):
        for name, value in _items(node):
            if name in FIELDS and _is_connection_status(value, everywhere=everywhere):
                yield f"puts {name!r} in a dict"
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        if RAW_UPDATE.search(node.value):
            yield "updates it in SQL"


def _call_writes(node: ast.Call, *, everywhere: bool) -> Iterator[str]:
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else ""
    called = called or (func.id if isinstance(func, ast.Name) else "")
    if called == "setattr" and len(node.args) >= 2:
        owner, field = node.args[:2]
        if isinstance(field, ast.Constant) and field.value in FIELDS:
            if everywhere or _says_connection(owner):
                yield f"setattr {field.value}"
    if called not in WRITES:
        return
    on_connections = everywhere or _says_connection(func)
    for keyword in node.keywords:
        values = [(keyword.arg, keyword.value)]
        if keyword.arg == "defaults" and isinstance(keyword.value, ast.Dict):
            values = _items(keyword.value)
        for name, value in values:
            if name in FIELDS and (on_connections or _is_connection_status(value)):
                yield f"writes {name}= in {called}"


def _items(node: ast.Dict) -> list[tuple[object, ast.expr]]:
    return [
        (key.value if isinstance(key, ast.Constant) else None, value)
        for key, value in zip(node.keys, node.values, strict=True)
    ]


def _says_connection(node: ast.expr) -> bool:
    """An expression about connections: `connection`, `row_connection`, `Connection.objects
    .filter(...)`, `connections.update`."""
    return any(
        "connection" in name.lower()
        for sub in ast.walk(node)
        for name in (
            sub.id if isinstance(sub, ast.Name) else "",
            sub.attr if isinstance(sub, ast.Attribute) else "",
        )
    )


def _is_connection_status(value: ast.expr, *, everywhere: bool = False) -> bool:
    """Connection.Status.X anywhere; in the connectors app also Status.X or the text."""
    if isinstance(value, ast.Attribute) and value.attr.isupper():
        owner = value.value
        if isinstance(owner, ast.Attribute) and owner.attr == "Status":
            return isinstance(owner.value, ast.Name) and owner.value.id == "Connection"
        return everywhere and isinstance(owner, ast.Name) and owner.id == "Status"
    if isinstance(value, ast.Constant) and everywhere:
        return value.value in Connection.Status.values
    return False


def test_only_the_status_module_sets_a_connections_status():
    writes = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts or str(path.relative_to(ROOT)) == STATUS_MODULE:
                continue
            writes += connection_status_writes(path, path.read_text())

    assert writes == []


def test_the_lint_finds_a_status_set_by_hand():
    here = ROOT / "connectors" / "example.py"
    by_hand = """
connection.status = Connection.Status.PAUSED
row.status, row.status_reason = Status.ERROR, plain
setattr(row, "status", "active")
Connection.objects.filter(id=i).update(status=Connection.Status.NEEDS_RECONNECT)
connections.update(status_reason="")
Connection.objects.create(organisation=org, status="paused")
Connection.objects.get_or_create(folder_id=f, defaults={"status": Status.ACTIVE})
changes = {"status": Status.DISCONNECTED}
cursor.execute("UPDATE documents_connection SET status = 'paused' WHERE id = %s", [i])
"""
    assert len(connection_status_writes(here, by_hand)) == 9
    elsewhere = ROOT / "operations" / "example.py"
    # A `row`, `Status` or "active" says nothing of connections there.
    assert len(connection_status_writes(elsewhere, by_hand)) == 6
    reads = """
Connection.objects.filter(status__in=SYNCING).exclude(status=Status.DISCONNECTED)
if connection.status == Status.ERROR: pass
run.status = RunStatus.FAILED
reservation.status = "released"
"""
    assert connection_status_writes(elsewhere, reads) == []
