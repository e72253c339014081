"""The bench's provider outage, through the real embed stage."""

import pytest

from bench._embedders import OUTAGE_FLAG_ENV, OutageEmbedder
from pipeline.engine import execute_stage
from pipeline.models import StageAttempt
from tests.support.files import make_pdf
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def outage_flag(tmp_path, monkeypatch, settings):
    flag = tmp_path / "outage"
    monkeypatch.setenv(OUTAGE_FLAG_ENV, str(flag))
    settings.PAPERLANE_EMBEDDER = "bench._embedders.OutageEmbedder"
    settings.PAPERLANE_RETRY_BASE_SECONDS = 0.2
    return flag


def test_embed_retries_while_the_flag_exists_and_succeeds_once_it_is_gone(api, outage_flag):
    run = accepted_run(api, make_pdf(2))
    outage_flag.touch()
    assert execute_stage(str(run.id), "extract")["outcome"] == "succeeded"
    execute_stage(str(run.id), "embed")

    failed = StageAttempt.objects.get(run=run, stage="embed")
    assert failed.outcome == StageAttempt.Outcome.TRANSIENT_ERROR
    assert failed.error_message == "TransientError: provider answered 503"

    outage_flag.unlink()
    run = drive(run.id)
    assert run.status == "succeeded"
    assert run.document.chunk_count > 0


def test_it_will_not_start_without_a_flag_path(monkeypatch):
    monkeypatch.delenv(OUTAGE_FLAG_ENV, raising=False)
    with pytest.raises(RuntimeError, match=OUTAGE_FLAG_ENV):
        OutageEmbedder()
