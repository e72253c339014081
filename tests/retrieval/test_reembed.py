"""One model at a time: `manage.py reembed` and the admin action move the searchable chunks
to the current model through real RQ jobs on the embed stage's bulk lanes, from their
stored texts, resuming after a killed worker; search never compares a query's vector with
another model's; the dashboard shows how far a re-embed has come."""

import io
import os
import re
import signal

import pytest
from django.core.management import call_command

from core.redis import redis_connection
from documents.models import Chunk
from operations.reembed import BEAT, reembed_in_progress, reembed_job_id, reembed_resume
from pipeline.models import ImportRun, RunPriority
from pipeline.queues import get_queue, priority_queue_names
from retrieval.embedding import HashingEmbedder, pack_vector, unpack_vector
from retrieval.reembed import document_reembed, embedding_coverage
from retrieval.search import documents_search
from tests.support.embedders import provider_calls
from tests.support.pipeline import TEST_PIPELINE_ENV, wait_for
from tests.support.processes import process_env, stage_worker_process
from tests.support.runs import document_with_chunks

OLD, NEW = "hashing-v1-384", "hashing-v1-64"
WORKS = pytest.mark.django_db(transaction=True)


def texts(n: int, word: str) -> list[str]:
    return [
        f"{word} chapter {i}: the harbour pilot reads the tide tables at dawn" for i in range(n)
    ]


def queued_jobs(priority: str) -> list[str]:
    return [
        job for name in priority_queue_names("embed", priority) for job in get_queue(name).job_ids
    ]


def reembed(*args: str) -> str:
    out = io.StringIO()
    call_command("reembed", *args, stdout=out)
    return out.getvalue()


def worker_env(**extra: str) -> dict[str, str]:
    return process_env(**{**TEST_PIPELINE_ENV, "PAPERLANE_EMBEDDING_DIMENSIONS": "64", **extra})


@pytest.mark.slow  # a worker process
@WORKS
def test_reembed_moves_every_searchable_chunk_to_the_new_model_through_a_bulk_worker(
    org, other_org, settings
):
    documents = [document_with_chunks(org, f"d{i}.pdf", texts(3, f"tide{i}")) for i in range(3)]
    other = document_with_chunks(other_org, "other.pdf", texts(2, "beacon"))
    before = dict(Chunk.objects.values_list("id", "text"))
    assert embedding_coverage(organisation=org) == (OLD, 9, 9)

    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64  # the new model
    assert embedding_coverage(organisation=org) == (NEW, 0, 9)
    said = reembed("--organisation", org.slug)

    assert "3 document(s)" in said and "3 re-embed job(s) queued" in said
    bulk = queued_jobs(RunPriority.BULK)
    assert sorted(bulk) == sorted(reembed_job_id(document_id=d.id, model=NEW) for d in documents)
    assert queued_jobs(RunPriority.INTERACTIVE) == []
    assert "0 re-embed job(s) queued" in reembed("--organisation", org.slug)  # already waiting
    assert len(queued_jobs(RunPriority.BULK)) == 3

    with stage_worker_process("embed", env=worker_env(), burst=True) as worker:
        assert worker.wait(timeout=90) == 0

    assert embedding_coverage(organisation=org) == (NEW, 9, 9)
    new = HashingEmbedder(dimensions=64)
    for chunk in Chunk.objects.filter(document__organisation=org):
        assert (chunk.embedding_model, chunk.embedding_dimensions) == (NEW, 64)
        assert unpack_vector(bytes(chunk.embedding)) == pytest.approx(new.embed([chunk.text])[0])
    # The same chunks, their texts untouched: nothing extracted or split again, no run.
    assert dict(Chunk.objects.values_list("id", "text")) == before
    assert not ImportRun.objects.exists()
    # Another organisation's chunks wait for their own re-embed.
    assert embedding_coverage(organisation=other_org) == (NEW, 0, 2)
    assert set(Chunk.objects.filter(document=other).values_list("embedding_model", flat=True)) == {
        OLD
    }
    hits = documents_search(organisation=org, query="tide1 harbour").hits
    assert hits[0].document_id == documents[1].id


@pytest.mark.slow  # a worker process
@WORKS
def test_a_reembed_whose_worker_is_killed_goes_on_from_where_it_stopped(org, settings):
    document = document_with_chunks(org, "long.pdf", texts(12, "lighthouse"))
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64
    reembed()
    env = worker_env(
        PAPERLANE_EMBEDDER="tests.support.embedders.RecordingEmbedder",
        PAPERLANE_EMBED_BATCH_SIZE="1",
        EMBED_DELAY="0.25",
        PAPERLANE_LEASE_SECONDS="2",
    )
    job_id = reembed_job_id(document_id=document.id, model=NEW)

    with stage_worker_process("embed", env=env) as worker:
        wait_for(lambda: len(provider_calls()) >= 4, timeout=60, what="four batches")
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    first = len(provider_calls())
    done = embedding_coverage(organisation=org).on_model
    assert 3 <= done < 12
    # Its beat runs out (PAPERLANE_LEASE_SECONDS): asking again queues it anew.
    wait_for(lambda: not redis_connection().exists(BEAT.format(job_id=job_id)), timeout=10)
    assert "1 re-embed job(s) queued" in reembed()

    with stage_worker_process("embed", env=env, burst=True) as worker:
        assert worker.wait(timeout=90) == 0

    assert embedding_coverage(organisation=org) == (NEW, 12, 12)
    # Only what was still to do: at most the batch in flight when it was killed, again.
    assert len(provider_calls()) - first <= 12 - done + 1
    assert len(provider_calls()) <= 13


@pytest.mark.django_db
def test_search_never_compares_a_query_with_vectors_of_another_model(org, settings):
    settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS = "always"  # the hashing vectors rank too
    old = document_with_chunks(org, "old.pdf", ["tide tide tide harbour"])
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64
    new = document_with_chunks(org, "new.pdf", ["tide harbour"])
    # The old model's stored vector is the one closest to the query's new-model vector
    # there can be: compared across models, it would rank first by embedding.
    query = HashingEmbedder(dimensions=64).embed(["tide"])[0]
    Chunk.objects.filter(document=old).update(embedding=pack_vector(query))

    hits = documents_search(organisation=org, query="tide").hits
    scores = {hit.document_id: hit.score for hit in hits}

    assert [hit.document_id for hit in hits] == [new.id, old.id]
    # Labelled with the query's model, the same vector does move it up: the test can tell.
    Chunk.objects.filter(document=old).update(embedding_model=NEW)
    relabelled = {
        h.document_id: h.score for h in documents_search(organisation=org, query="tide").hits
    }
    assert relabelled[old.id] > scores[old.id]


@pytest.mark.django_db
def test_during_a_reembed_the_coverage_counts_only_searchable_chunks_on_the_model(org, settings):
    first = document_with_chunks(org, "a.pdf", texts(4, "anchor"))
    document_with_chunks(org, "b.pdf", texts(2, "anchor"))
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64

    assert document_reembed(document_id=first.id) == 4
    assert document_reembed(document_id=first.id) == 0  # nothing left to do there

    coverage = embedding_coverage(organisation=org)
    assert coverage == (NEW, 4, 6) and coverage.share == pytest.approx(4 / 6)
    # Chunks of a version that is not searchable are not counted.
    Chunk.objects.filter(document=first).update(version=99)
    assert embedding_coverage(organisation=org) == (NEW, 0, 2)


@pytest.mark.django_db
def test_the_admin_action_queues_the_reembed_and_the_dashboard_shows_its_progress(
    org, operator, settings, redis_conn
):
    first = document_with_chunks(org, "a.pdf", texts(3, "compass"))
    document_with_chunks(org, "b.pdf", texts(1, "compass"))
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64

    response = operator.post(
        "/admin/documents/organisation/",
        {"action": "reembed_selected", "_selected_action": [org.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert "2 job(s) queued" in response.content.decode()
    assert len(queued_jobs(RunPriority.BULK)) == 2
    document_reembed(document_id=first.id)  # as the job would
    page = operator.get("/admin/pipeline/").content.decode()
    row = re.search(
        rf'<tr data-organisation="{org.slug}">(.*?)</tr>',
        page.split('id="embedding-model"')[1],
        re.S,
    )[1]
    assert re.search(r'data-field="on_model">3<', row) and re.search(r'data-field="total">4<', row)
    document_reembed(document_id=Chunk.objects.exclude(document=first).first().document_id)
    page = operator.get("/admin/pipeline/").content.decode()
    assert 'data-field="embedding-complete"' in page


@pytest.mark.django_db
def test_the_housekeeping_queues_again_a_reembed_whose_jobs_were_lost(org, settings, redis_conn):
    document_with_chunks(org, "a.pdf", texts(2, "buoy"))
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64
    reembed("--organisation", org.slug)
    redis_conn.flushdb()  # the jobs are lost, and what was asked with them
    assert reembed_resume() == 0
    reembed("--organisation", org.slug)
    for name in priority_queue_names("embed", RunPriority.BULK):
        get_queue(name).empty()  # the jobs are lost; the wish is kept

    assert reembed_resume() == 1
    assert len(queued_jobs(RunPriority.BULK)) == 1
    assert reembed_in_progress()
    document_reembed(document_id=Chunk.objects.first().document_id)
    assert reembed_resume() == 0
    assert not reembed_in_progress()  # done: nothing more to resume


@pytest.mark.slow  # a worker process
@WORKS
def test_a_reembed_whose_job_failed_is_not_queued_again_by_the_housekeeping_and_is_shown(
    org, operator, settings, redis_conn
):
    document = document_with_chunks(org, "a.pdf", texts(2, "anchor"))
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64
    reembed("--organisation", org.slug)
    env = worker_env(
        PAPERLANE_EMBEDDER="tests.support.embedders.FailsAfterEmbedder", EMBED_SUCCESSES="0"
    )
    with stage_worker_process("embed", env=env, burst=True) as worker:
        assert worker.wait(timeout=90) == 0
    job_id = reembed_job_id(document_id=document.id, model=NEW)
    assert get_queue(queued_jobs_lane(job_id)).failed_job_registry.get_job_ids() == [job_id]

    # Pass after pass, the housekeeping leaves it to a person.
    assert reembed_resume() == 0
    assert reembed_resume() == 0
    assert queued_jobs(RunPriority.BULK) == []
    page = operator.get("/admin/pipeline/").content.decode()
    row = re.search(rf'<tr data-document="{document.id}">(.*?)</tr>', page, re.S)[1]
    assert "503 Service Unavailable" in row and NEW in row

    # A person asking tries it again, and it leaves the list.
    assert "1 re-embed job(s) queued" in reembed("--organisation", org.slug)
    assert 'id="reembed-failures"' not in operator.get("/admin/pipeline/").content.decode()


def queued_jobs_lane(job_id: str) -> str:
    """The bulk lane whose failed registry holds the job."""
    for name in priority_queue_names("embed", RunPriority.BULK):
        if job_id in get_queue(name).failed_job_registry.get_job_ids():
            return name
    raise AssertionError(f"{job_id} failed on no bulk lane")
