"""Public documents made by real software, through the whole pipeline: uploaded to the
API, processed by real `run_workers` processes, stored in PostgreSQL and charged.

What each must become is in tests/support/real_world.py.
"""

import pytest

from documents.models import Chunk, DocumentText, QuotaReservation, UsageEntry
from pipeline.models import ImportRun
from tests.support import real_world
from tests.support.pipeline import running_workers, wait_terminal
from tests.support.uploads import upload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_real_documents_end_as_they_should_and_are_charged_their_real_pages(api, org):
    runs: dict[str, str] = {}
    with running_workers(concurrency="extract=2,ocr=1,embed=1"):
        for document in real_world.DOCUMENTS:
            response = upload(api, document.data, document.name)
            if document.refused:
                assert response.status_code == 422, document.name
                assert response.json()["code"] == document.refused
            else:
                assert response.status_code == 202, (document.name, response.content)
                runs[document.name] = response.json()["run_id"]
        ended = {str(id_): run for id_, run in wait_terminal(runs.values(), timeout=120).items()}

    assert ImportRun.objects.count() == len(runs)  # a refusal records nothing
    for document in real_world.DOCUMENTS:
        if not document.accepted:
            continue
        run = ended[runs[document.name]]
        reservation = QuotaReservation.objects.get(run=run)
        charged = list(UsageEntry.objects.filter(document=run.document_id).values_list("pages"))
        if document.fails:
            assert (run.status, run.error_code) == ("failed", document.fails), document.name
            assert (reservation.status, charged) == ("released", [])
            continue
        assert run.status == "succeeded", (document.name, run.error_code, run.error_message)
        run.document.refresh_from_db()
        assert run.document.page_count == document.pages, document.name
        assert run.document.unreadable_pages == list(document.unreadable), document.name
        assert (reservation.status, charged) == ("settled", [(document.pages,)])
        text = DocumentText.objects.get(document=run.document_id).text
        chunks = Chunk.objects.filter(document=run.document_id).order_by("index")
        assert chunks.count() == run.document.chunk_count
        assert (run.document.chunk_count > 0) == bool(text.strip()), document.name
        joined = " ".join(chunks.values_list("text", flat=True))
        for phrase in document.phrases:
            assert phrase in text, (document.name, phrase)
            assert all(word in joined for word in phrase.split()), (document.name, phrase)

    org.refresh_from_db()
    charged_pages = sum(d.pages for d in real_world.DOCUMENTS if d.succeeds)
    assert (org.pages_used, org.pages_reserved) == (charged_pages, 0)
