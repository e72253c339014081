"""Only settled content is searchable: a version's chunks are found once its run settles,
with its charge, and a run that ends without success takes the chunks it wrote with it."""

import pytest

from documents.models import Chunk, Document, UsageEntry
from documents.services.content import document_has_chunks
from pipeline.engine import execute_stage
from pipeline.models import ImportRun
from pipeline.services.people import run_cancel, run_dead_letter, run_retry
from pipeline.services.transitions import Actor
from tests.support.files import make_pdf
from tests.support.folders import local_folder_fixtures, sync, write
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

OPERATOR = Actor("user:operator")
_fast_settle, folder, connection = local_folder_fixtures("shared")


def found(api, words: str) -> list[str]:
    response = api.get("/api/v1/search", {"q": words})
    assert response.status_code == 200, response.content
    return [hit["document_id"] for hit in response.json()["results"]]


def run_until(run_id, stage: str) -> ImportRun:
    """Do the run's stages, as workers would, until `stage` is due."""
    for _ in range(10):
        run = ImportRun.objects.get(id=run_id)
        if run.stage == stage or run.is_terminal:
            return run
        assert execute_stage(str(run.id), run.stage)["outcome"] == "succeeded"
    raise AssertionError(f"run {run_id} never reached {stage}")


def test_chunks_are_found_only_once_their_run_settles(api, org):
    run = accepted_run(api, make_pdf(3, label="Lighthouse keeper"), name="log.pdf")
    run_until(run.id, "settle")
    document = Document.objects.get(id=run.document_id)

    # Embedded and stored, not yet charged: not searchable by any door.
    assert Chunk.objects.filter(document=document).exists()
    assert found(api, "lighthouse keeper") == []
    assert api.get(f"/api/v1/documents/{document.id}").json()["chunk_count"] == 0
    assert not document_has_chunks(document=document)

    assert drive(run.id).status == "succeeded"

    document.refresh_from_db()
    assert document.searchable_version == 1
    assert found(api, "lighthouse keeper") == [str(document.id)]
    stored = Chunk.objects.filter(document=document).count()
    assert api.get(f"/api/v1/documents/{document.id}").json()["chunk_count"] == stored
    assert document_has_chunks(document=document)


@pytest.mark.parametrize("end", ["cancel", "dead_letter"])
def test_a_run_ended_before_it_settled_leaves_nothing_found_or_charged(api, org, end):
    run = accepted_run(api, make_pdf(3, label="Tide table"))
    run_until(run.id, "settle")
    assert Chunk.objects.filter(document=run.document_id).exists()

    if end == "cancel":
        assert api.post(f"/api/v1/runs/{run.id}/cancel").status_code == 200
    else:
        run_dead_letter(run=run, actor=OPERATOR, reason="looks wrong")

    assert not Chunk.objects.filter(document=run.document_id).exists()
    # A settle delivered late finds the run ended: nothing becomes searchable or charged.
    assert execute_stage(str(run.id), "settle")["outcome"] == "skipped"
    assert found(api, "tide table") == []
    assert not UsageEntry.objects.filter(document=run.document_id).exists()
    assert Document.objects.get(id=run.document_id).searchable_version is None
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)


def test_a_retry_of_a_run_that_ended_at_settle_embeds_again_and_is_charged_once(api, org):
    run = accepted_run(api, make_pdf(2, label="Harbour dues"))
    run_until(run.id, "settle")
    run_dead_letter(run=run, actor=OPERATOR, reason="held for a look")

    retried = run_retry(run=run, actor=OPERATOR).run

    # Its chunks went when it ended, so it starts again where they are made.
    assert (retried.status, retried.stage) == ("queued", "embed")
    assert drive(run.id).status == "succeeded"
    assert found(api, "harbour dues") == [str(run.document_id)]
    assert [e.pages for e in UsageEntry.objects.filter(document=run.document_id)] == [2]


@pytest.mark.parametrize("end", ["settle", "cancel"])
def test_a_connected_files_new_version_is_found_only_once_it_settles(
    api, org, folder, connection, end
):
    path = write(folder, "rota.pdf", make_pdf(2, label="Lighthouse rota"))
    [first_id] = sync(connection).counts.run_ids + sync(connection).counts.run_ids
    document_id = drive(first_id).document_id
    assert found(api, "lighthouse") == [str(document_id)]
    path.write_bytes(make_pdf(3, label="Harbour rota"))
    [second_id] = sync(connection).counts.run_ids + sync(connection).counts.run_ids

    second = run_until(second_id, "settle")

    # The new version is embedded; search still reads the one that was charged.
    assert Document.objects.get(id=document_id).version == 2
    assert Chunk.objects.filter(document_id=document_id, version=2).exists()
    assert found(api, "lighthouse") == [str(document_id)]
    assert found(api, "harbour") == []

    if end == "settle":
        assert drive(second.id).status == "succeeded"
        assert found(api, "harbour") == [str(document_id)]
        assert found(api, "lighthouse") == []
        versions = set(Chunk.objects.filter(document_id=document_id).values_list("version"))
        assert versions == {(2,)}  # the superseded version's chunks went with the settle
    else:
        run_cancel(run=second, actor=OPERATOR)
        assert found(api, "lighthouse") == [str(document_id)]
        assert found(api, "harbour") == []
        versions = set(Chunk.objects.filter(document_id=document_id).values_list("version"))
        assert versions == {(1,)}
        assert Document.objects.get(id=document_id).searchable_version == 1
