"""The SQLite demo's search (FTS5, kept in step by triggers): the same answers in kind as
on PostgreSQL, and the known items found as well as FTS5 bm25 over any word finds them.
Run in a process of its own against a SQLite database the demo's settings migrate."""

import subprocess
import sys

import pytest

from tests.support.processes import ROOT, python_json, sqlite_demo_env


@pytest.mark.slow  # the demo's settings, in a process of its own
def test_the_demo_finds_what_people_type_through_fts5(tmp_path):
    env = sqlite_demo_env(tmp_path)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    result = python_json("-m", "tests.support.sqlite_search", env=env)

    answers = result["answers"]
    assert answers["tide"] == ["tide.pdf"]  # not another organisation's
    assert answers["alphabets"] == ["alphabet.pdf"]  # stemmed
    assert sorted(answers["high table"]) == ["table.pdf", "tide.pdf"]
    assert answers['"tide table"'] == ["tide.pdf"]
    assert answers["high table -tide"] == ["table.pdf"]
    assert answers["high table -keeper"] == ["table.pdf"]  # in tide.pdf's other chunk
    assert sorted(answers["march or water"]) == ["table.pdf", "tide.pdf"]
    assert answers["email"] == []  # "e-mail" is "e mail"
    assert answers['"keepers e mail"'] == ["tide.pdf"]
    assert answers["keeper's e-mail"] == ["tide.pdf"]
    assert answers["anchor"] == []  # the version that did not settle
    assert answers["water tide"] == ["table.pdf", "tide.pdf"] or answers["water tide"] == [
        "tide.pdf",
        "table.pdf",
    ]  # each holds one of the words
    assert answers["high water in table.pdf, by meaning too"] == ["table.pdf"]
    assert answers["tern in five documents"] == answers["tern documents"]
    # The FTS5 rows hold their chunk's id: the chunks found stay right when rowids change.
    assert answers["reef after a vacuum"] == answers["reef expected"]
    assert answers["reef after the remake"] == answers["reef expected"]
    assert answers["urchin after the remake"] == answers["urchin expected"]
    assert answers["glossary"] == ["alphabet.pdf"]
    assert answers["alphabet after the change"] == []
    assert answers["glossary after the removal"] == []
    for kind, score in result["mrr"].items():
        assert score >= 0.95, result
        assert score >= result["fts5"][kind], result
