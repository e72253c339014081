"""docs/configuration.md lists every setting config/settings.py reads, by its full name,
with the default the code has, and nothing it does not read; and there are few of them."""

import ast
import operator
import re

from pipeline.stage_list import STAGES
from tests.support.processes import ROOT

SETTINGS = ROOT / "config" / "settings.py"
DOC = ROOT / "docs" / "configuration.md"
# Read from the environment by boto3 itself, not by the settings.
READ_BY_LIBRARIES = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
# The PAPERLANE_* settings an operator may set; a bound nobody needs to change is a
# constant beside the code that uses it.
MOST_PAPERLANE_SETTINGS = 70
# Defaults computed from other settings or the machine: the expression in settings.py
# (as ast.unparse writes it), and how the document says it. A new or changed expression
# fails the comparison until it is added here.
COMPUTED = {
    "'' if not DEBUG else 'dev-only-insecure-secret-key'": "none",
    "not DEBUG": "true unless DEBUG",
    "0 if DEBUG else 31536000": "31536000",
    "_DEMO_DATABASE_URL": "the demo's embedded PostgreSQL",
    "BASE_DIR / 'media'": "media beside manage.py",
    "env('AWS_DEFAULT_REGION', default=None)": "AWS_DEFAULT_REGION",
    "socket.gethostname()": "the machine's host name",
}
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
_ARITHMETIC[ast.Pow] = operator.pow


def _is_env_read(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    reads_env = (isinstance(func, ast.Name) and func.id == "env") or (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "env"
    )
    return reads_env and isinstance(node.args[0], ast.Constant)


def settings_read(source: str) -> set[str]:
    """Every name the settings read from the environment (`env("X")`, `env.int("X")`, ...)
    and every PAPERLANE_ setting they define."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if _is_env_read(node):
            names.add(node.args[0].value)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.startswith("PAPERLANE_"):
                    names.add(target.id)
    return names


def paperlane_settings(source: str) -> set[str]:
    return {name for name in settings_read(source) if name.startswith("PAPERLANE_")}


def _value(node: ast.expr):
    """A literal, or arithmetic on literals (`50 * 1024 * 1024`); ValueError otherwise."""
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_value(node.left), _value(node.right))
    return ast.literal_eval(node)


def _rendered(value) -> str:
    """A default as the document writes it, normalised (see `_normalised`)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict | str) and not value:
        return "empty"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    if isinstance(value, dict):
        return ",".join(f"{key}={item}" for key, item in value.items())
    return str(value)


def _merged_into(tree: ast.Module) -> dict[int, ast.Dict]:
    """`{"local": 5, **{... env.dict("X", default={}) ...}}`: the dict display whose own
    entries the environment's overrides are merged into, by the env call's id."""
    merged = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and None in node.keys:
            for inner in ast.walk(node):
                if _is_env_read(inner):
                    merged[id(inner)] = node
    return merged


def code_defaults(source: str) -> dict[str, str]:
    """Each name read from the environment, and its default as the document writes it."""
    tree = ast.parse(source)
    merged = _merged_into(tree)
    defaults = {}
    for node in ast.walk(tree):
        if not _is_env_read(node):
            continue
        given = next((k.value for k in node.keywords if k.arg == "default"), None)
        if given is None:
            defaults[node.args[0].value] = "none"
            continue
        try:
            value = _value(given)
        except ValueError:
            expression = ast.unparse(given)
            defaults[node.args[0].value] = COMPUTED.get(expression, f"computed: {expression}")
            continue
        if id(node) in merged:
            display = merged[id(node)]
            pairs = zip(display.keys, display.values, strict=True)
            own = {_value(k): _value(v) for k, v in pairs if k is not None}
            value = {**own, **value}
        defaults[node.args[0].value] = _rendered(value)
    return defaults


def _normalised(cell: str) -> str:
    """The Default column's first value: without a remark in brackets after it, backticks
    or thousands separators; lists without spaces after their commas."""
    cell = cell.strip()
    cell = re.sub(r"^(.+?)\s+\(.*\)$", r"\1", cell)
    cell = cell.replace("`", "").replace(", ", ",")
    if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", cell):
        cell = cell.replace(",", "")
    if cell.lower() in ("true", "false"):
        cell = cell.lower()
    return cell


def _rows(text: str) -> list[list[str]]:
    return [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| `")]


def documented(text: str) -> set[str]:
    """The names in the first column of the document's tables."""
    names = set()
    for first, *_ in _rows(text):
        names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", first))
    return names


def documented_defaults(text: str) -> dict[str, str]:
    """Each documented name, and its Default column normalised."""
    defaults = {}
    for first, default, *_ in _rows(text):
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", first):
            defaults[name] = _normalised(default)
    return defaults


def _same(code: str, doc: str) -> bool:
    try:
        return float(code) == float(doc)
    except ValueError:
        return code == doc


def wrong_defaults(source: str, text: str) -> dict[str, tuple[str, str]]:
    """{name: (the code's default, the document's)} where they differ."""
    doc = documented_defaults(text)
    return {
        name: (default, doc[name])
        for name, default in code_defaults(source).items()
        if name in doc and not _same(default, doc[name])
    }


def test_every_setting_is_documented_by_its_full_name():
    missing = settings_read(SETTINGS.read_text()) - documented(DOC.read_text())

    assert missing == set(), f"add these to docs/configuration.md: {sorted(missing)}"


def test_every_documented_setting_is_read():
    stale = documented(DOC.read_text()) - settings_read(SETTINGS.read_text()) - READ_BY_LIBRARIES

    assert stale == set(), f"docs/configuration.md lists what settings.py does not: {stale}"


def test_a_setting_added_without_its_line_is_found():
    source = (
        SETTINGS.read_text() + '\nPAPERLANE_NEW_LIMIT = env.int("PAPERLANE_NEW_LIMIT", default=1)\n'
    )

    assert settings_read(source) - documented(DOC.read_text()) == {"PAPERLANE_NEW_LIMIT"}


def test_every_documented_default_is_the_codes():
    wrong = wrong_defaults(SETTINGS.read_text(), DOC.read_text())

    assert wrong == {}, f"(settings.py, docs/configuration.md) disagree: {wrong}"


def test_a_setting_documented_with_another_default_is_found():
    source = SETTINGS.read_text() + (
        '\nPAPERLANE_NEW_LIMIT = env.int("PAPERLANE_NEW_LIMIT", default=50 * 1024)\n'
        'PAPERLANE_NEW_NAME = env("PAPERLANE_NEW_NAME", default="")\n'
        'PAPERLANE_NEW_WHEN = env("PAPERLANE_NEW_WHEN", default=now())\n'
    )
    text = DOC.read_text() + (
        "\n| `PAPERLANE_NEW_LIMIT` | `51,200` (50 KiB) | Agrees. |\n"
        "| `PAPERLANE_NEW_NAME` | `paperlane` | Says a name where the code has none. |\n"
        "| `PAPERLANE_NEW_WHEN` | now | Computed, and in no table. |\n"
    )

    assert wrong_defaults(source, text) == {
        "PAPERLANE_NEW_NAME": ("empty", "paperlane"),
        "PAPERLANE_NEW_WHEN": ("computed: now()", "now"),
    }


def test_the_per_stage_defaults_documented_are_the_stage_lists():
    remarks = {
        first.strip(" `"): default
        for first, default, *_ in _rows(DOC.read_text())
        if "PAPERLANE_STAGE_" in first
    }
    expected = {
        "PAPERLANE_STAGE_TIMEOUTS": {s.name: s.default_timeout for s in STAGES},
        "PAPERLANE_STAGE_CONCURRENCY": {s.name: s.default_concurrency for s in STAGES},
        "PAPERLANE_STAGE_BULK_CONCURRENCY": {s.name: s.default_bulk_concurrency for s in STAGES},
    }

    for name, per_stage in expected.items():
        assert f"`{_rendered(per_stage)}`" in remarks[name], (name, remarks[name])


def test_there_are_at_most_70_paperlane_settings():
    count = len(paperlane_settings(SETTINGS.read_text()))

    assert count <= MOST_PAPERLANE_SETTINGS, (
        f"{count} PAPERLANE_* settings: make the bounds no operator sets constants"
    )


def test_a_setting_past_the_most_is_counted():
    source = SETTINGS.read_text()
    room = MOST_PAPERLANE_SETTINGS - len(paperlane_settings(source))
    added = "".join(
        f'\nPAPERLANE_EXTRA_{n} = env.int("PAPERLANE_EXTRA_{n}", default=1)\n'
        for n in range(room + 1)
    )

    assert len(paperlane_settings(source + added)) == MOST_PAPERLANE_SETTINGS + 1
