"""One model at a time, through the engine: `manage.py reembed` and the admin action send
each document's settled run back to `embed` on the bulk lanes; real workers re-embed it
from the text kept, resume after a kill where the last batch stopped, charge nothing; the
admin shows each re-embed as a run, and the dashboard its progress and failures."""

import io
import os
import re
import signal

import pytest
from django.core.management import call_command

from documents.models import Chunk, UsageEntry
from pipeline.models import (
    ImportRun,
    RunPriority,
    RunStatus,
    RunTransition,
    Stage,
    StageAttempt,
)
from pipeline.queues import priority_queue_names
from pipeline.selectors import reembeds_in_progress
from pipeline.services.reembed import documents_reembed
from pipeline.services.transitions import Actor
from retrieval.coverage import embedding_coverage
from retrieval.embedding import HashingEmbedder, unpack_vector
from retrieval.search import documents_search
from tests.support.embedders import provider_calls
from tests.support.files import make_pdf
from tests.support.lanes import waiting_job_ids
from tests.support.pipeline import TEST_PIPELINE_ENV, wait_for
from tests.support.processes import process_env, stage_worker_process
from tests.support.runs import drive
from tests.support.uploads import accepted_run

OLD, NEW = "hashing-v1-384", "hashing-v1-64"
WORKS = pytest.mark.django_db(transaction=True)
OPERATOR = Actor("test-operator")


def settled(client, *, pages: int = 1, words: int = 60, label: str = "Page") -> ImportRun:
    """An upload driven through every stage in this process: succeeded, searchable."""
    run = accepted_run(client, make_pdf(pages, words_per_page=words, label=label))
    run = drive(run.id)
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    return run


def reembed(*args: str) -> str:
    out = io.StringIO()
    call_command("reembed", *args, stdout=out)
    return out.getvalue()


def bulk_jobs() -> list[str]:
    return [
        job_id
        for name in priority_queue_names(Stage.EMBED, RunPriority.BULK)
        for job_id in waiting_job_ids(Stage.EMBED)
        if job_id
    ]


def worker_env(**extra: str) -> dict[str, str]:
    return process_env(**{**TEST_PIPELINE_ENV, "PAPERLANE_EMBEDDING_DIMENSIONS": "64", **extra})


@pytest.mark.slow  # worker processes
@WORKS
def test_reembed_sends_settled_runs_back_to_embed_and_bulk_workers_move_them_to_the_new_model(
    api, other_api, org, other_org, settings
):
    runs = [settled(api, label=f"Tide{i}") for i in range(3)]
    other = settled(other_api, label="Beacon")
    chunks_before = dict(Chunk.objects.values_list("id", "text"))
    charged_before = UsageEntry.objects.count()
    assert embedding_coverage(organisation=org).complete

    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64  # the new model
    said = reembed("--organisation", org.slug)

    assert "3 document(s)" in said and "3 sent back to embed" in said
    for run in runs:
        run = ImportRun.objects.get(id=run.id)
        assert (run.status, run.stage, run.priority) == ("queued", "embed", "bulk")
        assert RunTransition.objects.filter(run=run, reason=f"re-embed with {NEW}").exists()
    # Asking again sends nothing more: they are in the pipeline.
    assert "0 sent back to embed on the bulk lanes, 3 already in the pipeline" in reembed(
        "--organisation", org.slug
    )
    assert reembeds_in_progress() == 3

    with stage_worker_process("embed", "settle", env=worker_env(), burst=True) as worker:
        assert worker.wait(timeout=90) == 0

    assert embedding_coverage(organisation=org) == (NEW, 3, 3)
    new = HashingEmbedder(dimensions=64)
    for chunk in Chunk.objects.filter(document__organisation=org):
        assert (chunk.embedding_model, chunk.embedding_dimensions) == (NEW, 64)
        assert unpack_vector(bytes(chunk.embedding)) == pytest.approx(new.embed([chunk.text])[0])
    for run in runs:
        run = ImportRun.objects.get(id=run.id)
        assert run.status == RunStatus.SUCCEEDED and run.generation == 1
    # The same chunks under the same ids, nothing charged again, nothing extracted again.
    assert dict(Chunk.objects.values_list("id", "text")) == chunks_before
    assert UsageEntry.objects.count() == charged_before
    assert not StageAttempt.objects.filter(stage=Stage.EXTRACT, generation=1).exists()
    # Another organisation's chunks wait for their own re-embed.
    assert embedding_coverage(organisation=other_org) == (NEW, 0, 1)
    assert ImportRun.objects.get(id=other.id).generation == 0
    hits = documents_search(organisation=org, query="Tide1").hits
    assert hits[0].document_id == runs[1].document_id


@pytest.mark.slow  # worker processes, one killed
@WORKS
def test_a_reembed_whose_worker_is_killed_is_taken_back_and_goes_on_where_it_stopped(
    api, org, settings
):
    settings.PAPERLANE_EMBED_BATCH_SIZE = 1
    run = settled(api, pages=6, words=400)
    chunks = Chunk.objects.filter(document=run.document_id).count()
    assert chunks >= 8
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64
    reembed()
    env = worker_env(
        PAPERLANE_EMBEDDER="tests.support.embedders.RecordingEmbedder",
        PAPERLANE_EMBED_BATCH_SIZE="1",
        EMBED_DELAY="0.25",
        PAPERLANE_LEASE_SECONDS="2",
    )

    with stage_worker_process("embed", env=env) as worker:
        wait_for(lambda: len(provider_calls()) >= 4, timeout=60, what="four batches")
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    first = len(provider_calls())
    done = embedding_coverage(organisation=org).on_model
    assert 3 <= done < chunks
    # The sweeper takes the stage back once the lease is out; another worker goes on.
    wait_for(
        lambda: call_command("sweep") or not ImportRun.objects.get(id=run.id).lease_owner,
        timeout=20,
        what="the stage taken back",
    )
    with stage_worker_process("embed", "settle", env=env, burst=True) as worker:
        assert worker.wait(timeout=90) == 0

    run = ImportRun.objects.get(id=run.id)
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    assert embedding_coverage(organisation=org) == (NEW, chunks, chunks)
    # Only what was still to do: at most the batch in flight when it was killed, again.
    assert len(provider_calls()) - first <= chunks - done + 1
    outcomes = list(run.attempts_log.filter(stage=Stage.EMBED).values_list("outcome", flat=True))
    assert outcomes[-1] == "succeeded" and "abandoned" in outcomes


@WORKS
def test_a_rerun_of_embed_calls_the_provider_only_for_chunks_not_on_the_model(
    api, org, settings, monkeypatch
):
    settings.PAPERLANE_EMBED_BATCH_SIZE = 1
    run = settled(api, pages=3, words=400)
    chunks = Chunk.objects.filter(document=run.document_id).count()
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64
    # Half of the chunks are on the new model already (a re-embed stopped half way).
    half = list(Chunk.objects.filter(document=run.document_id).order_by("index")[: chunks // 2])
    new = HashingEmbedder(dimensions=64)
    from retrieval.embedding import pack_vector

    for chunk in half:
        chunk.embedding = pack_vector(new.embed([chunk.text])[0])
        chunk.embedding_model, chunk.embedding_dimensions = NEW, 64
        chunk.save(update_fields=["embedding", "embedding_model", "embedding_dimensions"])
    embedded = []
    original = HashingEmbedder.embed
    monkeypatch.setattr(
        HashingEmbedder,
        "embed",
        lambda self, texts, **kw: embedded.extend(texts) or original(self, texts, **kw),
    )

    assert documents_reembed(actor=OPERATOR).started == 1
    run = drive(run.id)

    assert run.status == RunStatus.SUCCEEDED
    assert len(embedded) == chunks - len(half)
    assert embedding_coverage(organisation=org) == (NEW, chunks, chunks)


@WORKS
def test_search_never_compares_a_query_with_vectors_of_another_model(api, org, settings):
    settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS = "always"  # the hashing vectors rank too
    old = settled(api, label="Tide tide tide harbour").document_id
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64
    new = settled(api, label="Tide harbour").document_id
    # The old model's stored vector is the one closest to the query's new-model vector
    # there can be: compared across models, it would rank first by embedding.
    from retrieval.embedding import pack_vector

    query = HashingEmbedder(dimensions=64).embed(["tide"])[0]
    Chunk.objects.filter(document=old).update(embedding=pack_vector(query))

    hits = documents_search(organisation=org, query="tide").hits

    assert hits[0].document_id == new
    # Labelled with the query's model, the same vector does move it up: the test can tell.
    Chunk.objects.filter(document=old).update(embedding_model=NEW)
    relabelled = documents_search(organisation=org, query="tide").hits
    assert relabelled[0].document_id == old


@WORKS
def test_during_a_reembed_the_coverage_counts_only_searchable_chunks_on_the_model(
    api, org, settings
):
    first = settled(api, pages=2, words=400)
    settled(api)
    total = Chunk.objects.count()
    firsts = Chunk.objects.filter(document=first.document_id).count()
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64
    documents_reembed(actor=OPERATOR, limit=1)  # the oldest document first
    drive(first.id)

    coverage = embedding_coverage(organisation=org)
    assert coverage == (NEW, firsts, total) and coverage.share == pytest.approx(firsts / total)
    # Chunks of a version that is not searchable are not counted.
    Chunk.objects.filter(document=first.document_id).update(version=99)
    assert embedding_coverage(organisation=org) == (NEW, 0, total - firsts)


@WORKS
def test_a_document_with_work_in_the_pipeline_is_left_to_it(api, org, settings):
    run = settled(api)
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64
    assert documents_reembed(actor=OPERATOR).started == 1

    again = documents_reembed(actor=OPERATOR)

    assert (again.documents, again.started, again.in_pipeline) == (1, 0, 1)
    assert ImportRun.objects.get(id=run.id).generation == 1


@WORKS
def test_the_admin_action_sends_runs_back_and_the_dashboard_shows_the_progress(
    api, org, operator, settings
):
    first = settled(api, pages=2, words=400)
    settled(api)
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64

    response = operator.post(
        "/admin/documents/organisation/",
        {"action": "reembed_selected", "_selected_action": [org.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert "2 sent back to embed on the bulk lanes" in response.content.decode()
    assert ImportRun.objects.filter(stage=Stage.EMBED, priority=RunPriority.BULK).count() == 2
    drive(first.id)
    page = operator.get("/admin/pipeline/").content.decode()
    section = page.split('id="embedding-model"')[1]
    row = re.search(rf'<tr data-organisation="{org.slug}">(.*?)</tr>', section, re.S)[1]
    firsts = Chunk.objects.filter(document=first.document_id).count()
    assert re.search(rf'data-field="on_model">{firsts}<', row)
    assert re.search(rf'data-field="total">{Chunk.objects.count()}<', row)
    assert "1 run re-embeds on the bulk lanes now" in section
    for run in ImportRun.objects.exclude(id=first.id):
        drive(run.id)
    assert 'data-field="embedding-idle"' in operator.get("/admin/pipeline/").content.decode()


@pytest.mark.slow  # a worker process
@WORKS
def test_a_reembed_that_fails_waits_for_a_person_and_asking_again_retries_it(
    api, org, operator, settings
):
    run = settled(api)
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64
    reembed("--organisation", org.slug)
    env = worker_env(
        PAPERLANE_EMBEDDER="tests.support.embedders.FailsAfterEmbedder",
        EMBED_SUCCESSES="0",
        PAPERLANE_RETRY_MAX_ATTEMPTS="1",
    )
    with stage_worker_process("embed", env=env, burst=True) as worker:
        assert worker.wait(timeout=90) == 0

    run = ImportRun.objects.get(id=run.id)
    assert run.status == RunStatus.DEAD_LETTER
    # The searchable chunks of the old model stay searchable; nothing was charged back.
    assert Chunk.objects.filter(document=run.document_id, embedding_model=OLD).exists()
    page = operator.get("/admin/pipeline/").content.decode()
    row = re.search(rf'<tr data-document="{run.document_id}">(.*?)</tr>', page, re.S)[1]
    assert "503 Service Unavailable" in run.attempts_log.last().error_message
    assert "Dead letter" in row or "dead" in row.lower()
    assert bulk_jobs() == []  # nothing sends it again by itself

    # A person asking retries it, and it leaves the list.
    assert "1 sent back to embed" in reembed("--organisation", org.slug)
    run = ImportRun.objects.get(id=run.id)
    assert (run.status, run.stage) == ("queued", "embed")
    assert 'id="reembed-failures"' not in operator.get("/admin/pipeline/").content.decode()
