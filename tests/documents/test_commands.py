from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from documents.models import Organisation

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_create_org_then_token_then_member():
    run("create_org", "initech", "--pages", "250")
    token = run("create_api_token", "initech").strip().splitlines()[-1]
    run("add_member", "initech", "peter", "--password", "tps-report-1", "--staff")

    org = Organisation.objects.get(slug="initech")
    assert org.page_limit == 250
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/v1/quota")
    assert response.json()["page_limit"] == 250
    peter = User.objects.get(username="peter")
    assert peter.is_staff and peter.check_password("tps-report-1")
    assert peter.has_perm("jobs.view_importrun")
    assert peter.memberships.get().organisation == org


def test_create_org_again_updates_the_limit():
    run("create_org", "initech", "--pages", "10")
    run("create_org", "initech", "--pages", "20")

    assert Organisation.objects.get(slug="initech").page_limit == 20


def test_commands_name_an_unknown_organisation():
    from django.core.management.base import CommandError

    from documents.errors import NotFound

    with pytest.raises((CommandError, NotFound)):
        run("create_api_token", "nobody")
