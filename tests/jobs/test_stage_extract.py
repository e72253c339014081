"""The extract stage on PostgreSQL: readable errors for unreadable documents."""

import pytest

from documents.models import QuotaReservation
from jobs.models import StageAttempt
from tests.support.files import make_damaged_pdf, make_encrypted_pdf
from tests.support.runs import drive, unchecked_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("data", "message"),
    [(make_damaged_pdf(3), "damaged"), (make_encrypted_pdf(3), "password")],
    ids=["damaged", "encrypted"],
)
def test_unreadable_pdfs_fail_after_one_attempt_with_a_readable_error(org, api, data, message):
    run = drive(unchecked_run(org, data, kind="pdf", pages=3).id)

    assert run.status == "failed"
    assert message in run.error_message
    attempts = list(StageAttempt.objects.filter(run=run, stage="extract"))
    assert [a.outcome for a in attempts] == ["permanent_error"]
    assert QuotaReservation.objects.get(run=run).status == "released"
    body = api.get(f"/api/v1/runs/{run.id}").json()
    assert body["status"] == "failed"
    assert body["error"]["code"] == "unreadable_document"
    assert message in body["error"]["message"]
