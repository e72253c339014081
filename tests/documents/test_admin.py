"""The organisations admin: a page limit is never set below what is used and held."""

import pytest
from django.test import Client

from documents.services.organisations import member_add
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(org) -> Client:
    member_add(organisation=org, username="olga", password="operator-pass-1", staff=True)
    client = Client()
    assert client.login(username="olga", password="operator-pass-1")
    return client


def _change(client, org, **fields):
    form = {
        "slug": org.slug,
        "name": org.name,
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        **fields,
    }
    return client.post(f"/admin/documents/organisation/{org.id}/change/", form)


def test_a_page_limit_below_the_pages_held_is_refused_with_the_reason(operator, org, api):
    accepted_run(api, make_pdf(2))

    refused = _change(operator, org, page_limit="1")

    assert refused.status_code == 200
    assert "cannot go below the 2 pages" in refused.content.decode()
    org.refresh_from_db()
    assert org.page_limit == 1000


def test_an_operator_changes_the_name_and_limit_without_touching_the_totals(operator, org, api):
    accepted_run(api, make_pdf(2))

    changed = _change(operator, org, name="Acme Ltd", page_limit="500")

    assert changed.status_code == 302
    org.refresh_from_db()
    assert (org.name, org.page_limit, org.pages_reserved) == ("Acme Ltd", 500, 2)
