"""The store stage: the stored bytes must be the ones accepted."""

import pytest

from documents.storage import storage_delete
from tests.support.files import make_pdf
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_changed_stored_file_is_a_permanent_error(org, api):

    run = accepted_run(api, make_pdf(1))
    storage_delete(key=run.document.storage_key)

    run = drive(run.id)

    assert run.status == "failed"
    assert "no longer in storage" in run.error_message
