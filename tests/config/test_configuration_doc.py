"""docs/configuration.md lists every setting config/settings.py reads, by its full name,
and nothing it does not read."""

import ast
import re

from tests.support.processes import ROOT

SETTINGS = ROOT / "config" / "settings.py"
DOC = ROOT / "docs" / "configuration.md"
# Read from the environment by boto3 itself, not by the settings.
READ_BY_LIBRARIES = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}


def settings_read(source: str) -> set[str]:
    """Every name the settings read from the environment (`env("X")`, `env.int("X")`, ...)
    and every PAPERLANE_ setting they define."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            reads_env = (isinstance(func, ast.Name) and func.id == "env") or (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "env"
            )
            if reads_env and node.args and isinstance(node.args[0], ast.Constant):
                names.add(node.args[0].value)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.startswith("PAPERLANE_"):
                    names.add(target.id)
    return names


def documented(text: str) -> set[str]:
    """The names in the first column of the document's tables."""
    names = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", first))
    return names


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
