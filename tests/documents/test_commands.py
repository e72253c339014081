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

    with pytest.raises(CommandError, match="No organisation with slug 'nobody'"):
        run("create_api_token", "nobody")


def test_a_limit_below_what_is_used_and_held_is_refused(api, org):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management.base import CommandError

    from tests.support.files import make_pdf

    api.post("/api/v1/documents", {"file": SimpleUploadedFile("a.pdf", make_pdf(5))})

    with pytest.raises(CommandError, match="below the 5 pages already used or held"):
        run("create_org", org.slug, "--pages", "4")
    org.refresh_from_db()
    assert org.page_limit == 1000


def test_the_admin_shows_runs_and_documents_read_only(org, api):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from documents.services.organisations import member_add
    from jobs.models import ImportRun
    from tests.support.files import make_pdf

    body = api.post("/api/v1/documents", {"file": SimpleUploadedFile("a.pdf", make_pdf(2))}).json()
    member_add(organisation=org, username="olga", password="operator-pass-1", staff=True)
    client = Client()
    client.login(username="olga", password="operator-pass-1")

    run_page = client.get(f"/admin/jobs/importrun/{body['run_id']}/change/")
    delete_page = client.get(f"/admin/jobs/importrun/{body['run_id']}/delete/")
    limit = client.post(
        f"/admin/documents/organisation/{org.id}/change/",
        {
            "slug": org.slug,
            "name": org.name,
            "page_limit": "1",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )

    assert run_page.status_code == 200 and "accepted" in run_page.content.decode()
    assert delete_page.status_code == 403
    assert ImportRun.objects.filter(id=body["run_id"]).exists()
    assert "cannot go below the 2 pages" in limit.content.decode()

    changed = client.post(
        f"/admin/documents/organisation/{org.id}/change/",
        {
            "slug": org.slug,
            "name": "Acme Ltd",
            "page_limit": "500",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )
    assert changed.status_code == 302
    org.refresh_from_db()
    assert (org.name, org.page_limit, org.pages_reserved) == ("Acme Ltd", 500, 2)
