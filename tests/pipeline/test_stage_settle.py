"""The settle stage: charge the real page count once."""

import pytest

from documents.models import UsageEntry
from tests.support.files import make_docx
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_settle_corrects_a_docx_estimate_to_the_extracted_count(api, org):
    run = accepted_run(api, make_docx(3, pages_property=2), name="notes.docx")
    assert run.reservation.pages == 2

    run = drive(run.id)

    assert run.status == "succeeded"
    assert UsageEntry.objects.get(document=run.document_id).pages == 2
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (2, 0)
