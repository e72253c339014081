"""The pipeline's admin: runs are read-only records; RQ's pages are linked for staff."""

import re

import pytest
from django.test import Client

from documents.services.organisations import member_add
from jobs.models import ImportRun
from jobs.pipeline import STAGES
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(org) -> Client:
    member_add(organisation=org, username="olga", password="operator-pass-1", staff=True)
    client = Client()
    assert client.login(username="olga", password="operator-pass-1")
    return client


def test_the_run_page_shows_its_history_and_runs_cannot_be_deleted(operator, api):
    run = accepted_run(api, make_pdf(2))

    page = operator.get(f"/admin/jobs/importrun/{run.id}/change/")
    delete = operator.get(f"/admin/jobs/importrun/{run.id}/delete/")

    assert page.status_code == 200 and "accepted" in page.content.decode()
    assert delete.status_code == 403
    assert ImportRun.objects.filter(id=run.id).exists()


def test_operators_reach_rqs_queue_pages_from_the_admin_index(operator):
    index = operator.get("/admin/").content.decode()
    assert "/admin/django_rq/dashboard/" in index

    stats = operator.get("/admin/django_rq/dashboard/")

    assert stats.status_code == 200
    listed = re.findall(r">\s*([a-z]+)\s*</a>", stats.content.decode())
    assert {spec.queue for spec in STAGES} <= set(listed)
