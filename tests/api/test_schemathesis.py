"""The API as its OpenAPI document describes it: schemathesis sends requests made from the
live `/api/v1/openapi.json` (valid ones and invalid ones, alone and in sequences that
follow the identifiers one answer gives to the next) and checks every answer against what
the document promises. tests/api/schemathesis.toml holds the exceptions and why."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from documents.services.organisations import organisation_create
from documents.services.tokens import api_token_create
from pipeline.models import RunStatus
from tests.support.files import make_docx, make_pdf
from tests.support.processes import process_env, web_server
from tests.support.runs import drive
from tests.support.uploads import accepted_run

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CONFIG = Path(__file__).with_name("schemathesis.toml")
# Real files of each media type an upload declares (tests/api/schemathesis_hooks.py).
HOOKS = "tests.api.schemathesis_hooks"
ROOT = Path(__file__).resolve().parents[2]
# Three seeds, fixed, so that a run in CI sends what the last run sent and a failure one
# seed happens not to find another does; SCHEMATHESIS_SEED and SCHEMATHESIS_EXAMPLES try
# others, and more of them.
SEEDS = os.environ.get("SCHEMATHESIS_SEED", "20240601,1,2").split(",")
EXAMPLES = os.environ.get("SCHEMATHESIS_EXAMPLES", "25")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seed", SEEDS)
def test_every_answer_is_one_the_openapi_document_describes(tmp_path, seed):
    org = organisation_create(slug="fuzzed", page_limit=1000)
    _, raw = api_token_create(organisation=org, name="schemathesis", role="admin")
    # Processed documents, so that lists are not empty and a sequence can follow a listed
    # document to its own answers (its file, its deletion).
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    for data, name in ((make_pdf(2), "report.pdf"), (make_docx(3), "notes.docx")):
        assert drive(accepted_run(api, data, name=name).id).status == RunStatus.SUCCEEDED
    # Without the per-token limit: every request is this one token's, and a 429 for most
    # of them would check nothing else.
    site = process_env(PAPERLANE_API_RATE_PER_MINUTE="0", LOG_LEVEL="ERROR")

    with web_server(workers=2, threads=2, env=site) as base:
        command = [
            str(SCHEMATHESIS),
            "--config-file",
            str(CONFIG),
            "run",
            f"{base}/api/v1/openapi.json",
            "--checks",
            "all",
            "--header",
            f"Authorization: Bearer {raw}",
            "--max-examples",
            EXAMPLES,
            "--seed",
            seed,
            # One worker: with two, Hypothesis describing its filters from two threads at
            # once meets CPython 3.11's "AST constructor recursion depth mismatch".
            "--workers",
            "1",
            "--request-timeout",
            "10",
            # Nothing kept between runs: each sends what the seed says.
            "--generation-database",
            "none",
            "--report",
            "junit",
            "--report-dir",
            str(tmp_path / "report"),
            "--no-color",
        ]
        result = subprocess.run(
            command,
            cwd=tmp_path,
            env={**os.environ, "SCHEMATHESIS_HOOKS": HOOKS, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    assert result.returncode == 0, result.stdout + result.stderr
