"""The demo runs on SQLite, where the tests' own database is PostgreSQL: in a process
of its own, on a fresh SQLite file, uploads go through every stage they are due for,
are charged once, settling again charges nothing, and search finds them (and not a
document that has not settled)."""

import pytest

from tests.support.processes import python_json, sqlite_demo_env

pytestmark = pytest.mark.slow

SCRIPT = """
import json
import django
from django.test.utils import setup_test_environment

django.setup()
setup_test_environment()  # the test client's host
from django.core.management import call_command
from django.test import Client

from documents.models import Chunk, UsageEntry
from documents.services.organisations import organisation_create
from documents.services.quota import quota_get, quota_settle
from documents.services.tokens import api_token_create
from pipeline.engine import execute_stage
from pipeline.models import StageAttempt
from tests.support.files import make_docx, make_pdf
from tests.support.runs import drive
from tests.support.uploads import accepted_run

call_command("migrate", verbosity=0)
org = organisation_create(slug="demo", page_limit=100, name="Demo")
_, raw = api_token_create(organisation=org, name="demo")
client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
runs = [
    drive(accepted_run(client, make_pdf(3, label="Lighthouse")).id),
    drive(accepted_run(client, make_docx(3), "doc.docx").id),
]
# Embedded, not settled: its chunks are stored and must not be found.
pending = accepted_run(client, make_pdf(2, label="Lighthouse"), "pending.pdf")
for stage in ("extract", "embed"):
    execute_stage(str(pending.id), stage)
again = quota_settle(reservation=runs[0].reservation, document=runs[0].document, pages=3)
quota = quota_get(organisation_id=org.id)
found = client.get("/api/v1/search", {"q": "lighthouse searchable"}).json()
print(json.dumps({
    "search": [(hit["filename"], hit["pages"]) for hit in found["results"]],
    "ranking": found["ranking"],
    "statuses": [run.status for run in runs],
    "errors": [run.error_message for run in runs],
    "stages": sorted(set(StageAttempt.objects.values_list("stage", flat=True))),
    "pages_used": quota.pages_used,
    "pages_reserved": quota.pages_reserved,
    "entries": UsageEntry.objects.count(),
    "charged_again": again.charged,
    "pending_chunks": Chunk.objects.filter(document=pending.document_id).count(),
}))
"""


def test_uploads_go_through_the_pipeline_on_sqlite(tmp_path, settings):
    env = sqlite_demo_env(tmp_path, REDIS_URL=settings.REDIS_URL)
    outcome = python_json("-c", SCRIPT, env=env)

    assert outcome["statuses"] == ["succeeded", "succeeded"], outcome["errors"]
    assert outcome["stages"] == ["embed", "extract", "settle"]
    assert outcome["entries"] == 2
    # The run not settled still holds its 2 pages.
    assert outcome["pages_used"] >= 4 and outcome["pages_reserved"] == 2
    # The PDF holds both words ("Lighthouse 1", …; found through FTS5) and comes first,
    # the DOCX holds one ("searchable") and follows. The document embedded but not
    # settled holds them too, and is not found.
    assert outcome["search"] == [["doc.pdf", 3], ["doc.docx", 1]]
    assert outcome["pending_chunks"] > 0
    assert outcome["ranking"] == "text"  # the hashing embedder's cosine does not rank
    assert outcome["charged_again"] is False
