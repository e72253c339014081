"""The embed stage: chunks under stable ids, so a re-run overwrites instead of adding."""

import uuid

import pytest
from django.db.models import F
from django.utils import timezone

from core.provider_breaker import KEY, breaker
from core.redis import redis_connection
from documents.models import Chunk
from pipeline.engine import execute_stage
from pipeline.models import ImportRun
from pipeline.services.people import run_cancel
from pipeline.services.transitions import Actor
from pipeline.stages import embed as embed_stage
from retrieval.embedding import PROVIDER
from tests.support.embedders import HookedEmbedder
from tests.support.files import make_pdf
from tests.support.runs import drive
from tests.support.uploads import accepted_run


@pytest.mark.django_db(transaction=True)
def test_re_running_embed_overwrites_chunks_instead_of_adding(api):
    run = drive(accepted_run(api, make_pdf(6, words_per_page=300)).id)
    before = list(Chunk.objects.filter(document=run.document_id).values_list("id", "index"))
    # As an operator's retry from embed would: a new generation of the same run.
    ImportRun.objects.filter(id=run.id).update(
        status="processing", stage="embed", generation=F("generation") + 1
    )

    result = execute_stage(str(run.id), "embed")

    assert result["outcome"] == "succeeded"
    after = list(Chunk.objects.filter(document=run.document_id).values_list("id", "index"))
    assert sorted(after) == sorted(before) and len(before) > 1


def test_chunk_ids_are_stable_per_document_version_and_index():
    document = uuid.uuid4()
    a = Chunk.stable_id(document_id=document, version=1, index=3)

    assert a == Chunk.stable_id(document_id=document, version=1, index=3)
    assert a != Chunk.stable_id(document_id=document, version=2, index=3)
    assert a != Chunk.stable_id(document_id=document, version=1, index=4)


@pytest.mark.django_db(transaction=True)
def test_a_document_with_more_chunks_than_the_limit_fails_naming_it(api, monkeypatch):
    monkeypatch.setattr(embed_stage, "MAX_CHUNKS_PER_DOCUMENT", 2)

    run = drive(accepted_run(api, make_pdf(6, words_per_page=300)).id)

    assert (run.status, run.stage, run.error_code) == ("failed", "embed", "too_many_chunks")
    assert "the limit is 2 chunks" in run.error_message
    assert not Chunk.objects.filter(document=run.document_id).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("batch_size", [1, 2, 3, 1000])
def test_every_chunk_is_written_once_whatever_the_batches(api, settings, batch_size):
    settings.PAPERLANE_EMBED_BATCH_SIZE = batch_size

    run = drive(accepted_run(api, make_pdf(6, words_per_page=300)).id)

    assert run.status == "succeeded"
    indexes = sorted(Chunk.objects.filter(document=run.document_id).values_list("index", flat=True))
    assert len(indexes) > 3
    assert indexes == list(range(len(indexes)))
    run.document.refresh_from_db()
    assert run.document.chunk_count == len(indexes)


@pytest.mark.django_db(transaction=True)
def test_the_providers_failures_are_counted_by_its_breaker_and_a_success_closes_it(
    api, settings, monkeypatch
):
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.FlakyEmbedder"
    monkeypatch.setattr("core.provider_breaker.PAUSE_AFTER_FAILURES", 2)
    monkeypatch.setenv("EMBED_FAILURES", "2")
    run = accepted_run(api, make_pdf(1))
    execute_stage(str(run.id), "extract")
    provider = breaker(PROVIDER)

    def embed_now() -> str:  # as if the retry's backoff (and any pause) had passed
        ImportRun.objects.filter(id=run.id).update(due_at=timezone.now())
        return execute_stage(str(run.id), "embed")["outcome"]

    assert [embed_now(), embed_now()] == ["transient_error", "transient_error"]
    assert provider.paused_for() > 0  # the second failure in a row opened it

    assert embed_now() == "succeeded"
    assert provider.paused_for() == 0
    assert not redis_connection().exists(KEY.format(name=PROVIDER))


@pytest.mark.django_db(transaction=True)
def test_a_batch_embedded_after_its_run_was_cancelled_is_not_written(api, settings, monkeypatch):
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.HookedEmbedder"
    settings.PAPERLANE_EMBED_BATCH_SIZE = 1
    run = accepted_run(api, make_pdf(6, words_per_page=300))
    assert execute_stage(str(run.id), "extract")["outcome"] == "succeeded"
    batches = []

    def cancel_during_the_second(texts):
        batches.append(texts)
        if len(batches) == 2:  # the first batch is written; the worker is embedding the next
            run_cancel(run=run, actor=Actor("user:test"))

    monkeypatch.setattr(HookedEmbedder, "before_batch", staticmethod(cancel_during_the_second))

    result = execute_stage(str(run.id), "embed")

    # The late batch wrote nothing, and the cancel took the first one's chunk with it.
    assert not Chunk.objects.filter(document=run.document_id).exists()
    assert result["outcome"] == "lease_lost" and len(batches) == 2
    run.refresh_from_db()
    assert run.status == "cancelled" and run.progress_done == 1
