from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from documents.models import Organisation
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run

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
    assert peter.has_perm("pipeline.view_importrun")
    assert peter.memberships.get().organisation == org


@pytest.mark.parametrize("weak", ["password", "12345678", "short1", "peter1234"])
def test_add_member_refuses_a_password_the_validators_refuse(weak):
    run("create_org", "initech", "--pages", "250")

    with pytest.raises(CommandError) as refused:
        run("add_member", "initech", "peter", "--password", weak)

    assert "password" in str(refused.value).lower()
    assert not User.objects.filter(username="peter").exists()


def test_create_org_again_updates_the_limit():
    run("create_org", "initech", "--pages", "10")
    run("create_org", "initech", "--pages", "20")

    assert Organisation.objects.get(slug="initech").page_limit == 20


def test_commands_name_an_unknown_organisation():
    with pytest.raises(CommandError, match="No organisation with slug 'nobody'"):
        run("create_api_token", "nobody")


def test_a_limit_below_what_is_used_and_held_is_refused(api, org):
    accepted_run(api, make_pdf(5))

    with pytest.raises(CommandError, match="below the 5 pages already used or held"):
        run("create_org", org.slug, "--pages", "4")
    org.refresh_from_db()
    assert org.page_limit == 1000


def test_create_api_token_refuses_past_the_active_token_limit_plainly(org, settings):
    settings.PAPERLANE_MAX_ACTIVE_TOKENS = 1
    run("create_api_token", org.slug)

    with pytest.raises(CommandError, match="limit of 1 active API tokens"):
        run("create_api_token", org.slug)


def _demo_token(output: str) -> str:
    [line] = [line for line in output.splitlines() if line.strip().startswith("API token")]
    return line.split()[-1]


def test_demo_setup_starts_again_keeping_the_limit_raised_and_pages_used():
    first = run("demo_setup", "--port", "8031")
    demo = Organisation.objects.get(slug="demo")
    assert demo.page_limit == 1000
    # An operator raised the limit in the admin, and the demo used more than it first had.
    Organisation.objects.filter(id=demo.id).update(page_limit=5000, pages_used=3000)

    again = run("demo_setup", "--port", "8031")

    demo.refresh_from_db()
    assert (demo.page_limit, demo.pages_used) == (5000, 3000)
    token = _demo_token(again)
    assert token != _demo_token(first)
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/v1/quota")
    assert response.status_code == 200
    assert response.json()["page_limit"] == 5000
