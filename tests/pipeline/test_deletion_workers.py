"""Deleting a document while real worker processes (run_workers) are at work on it."""

import pytest

from documents.models import Chunk, Document, DocumentText, QuotaReservation, UsageEntry
from pipeline.models import ImportRun, StageAttempt
from tests.support.files import make_pdf
from tests.support.pipeline import running_workers, wait_for, wait_terminal
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_document_deleted_half_way_through_embedding_keeps_nothing_and_costs_nothing(
    api, org, media_files
):
    slow_embedding = {
        "PAPERLANE_EMBEDDER": "tests.support.embedders.SlowEmbedder",
        "PAPERLANE_EMBED_BATCH_SIZE": "2",
        "EMBED_DELAY": "0.4",
    }
    with running_workers(concurrency="extract=1,ocr=1,embed=1", **slow_embedding):
        run = accepted_run(api, make_pdf(12, words_per_page=300), name="deleted.pdf")
        wait_for(
            lambda: (
                ImportRun.objects.filter(id=run.id, stage="embed", progress_done__gte=4)
                .exclude(lease_owner="")
                .exists()
            ),
            timeout=60,
            what="embed to be half way",
        )
        assert Chunk.objects.filter(document=run.document_id).exists()

        assert api.delete(f"/api/v1/documents/{run.document_id}").status_code == 204

        # The one embed worker takes the next document only once it has let go of the
        # deleted one: whatever it did after the deletion is done by then.
        after = accepted_run(api, make_pdf(1), name="after.pdf")
        assert wait_terminal([after.id], timeout=60)[after.id].status == "succeeded"

    run.refresh_from_db()
    assert run.status == "cancelled"
    assert not Chunk.objects.filter(document=run.document_id).exists()
    assert not DocumentText.objects.filter(document=run.document_id).exists()
    assert Document.objects.get(id=run.document_id).chunk_count == 0
    assert not UsageEntry.objects.filter(document=run.document_id).exists()
    assert QuotaReservation.objects.get(run=run).status == "released"
    embed = StageAttempt.objects.filter(run=run, stage="embed")
    assert list(embed.values_list("outcome", flat=True)) == ["stopped"]
    assert not StageAttempt.objects.filter(run=run, stage="settle").exists()
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (1, 0)
    assert media_files() == [after.document.storage_key]
