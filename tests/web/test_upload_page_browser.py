"""The upload page in a real browser, against a real gunicorn."""

import pytest

from documents.services.organisations import member_add, organisation_create
from pipeline.models import ImportRun
from tests.support.files import HTML_AS_PDF, make_pdf
from tests.support.processes import web_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_member_logs_in_uploads_and_sees_the_document(page, tmp_path):
    org = organisation_create(slug="browser", page_limit=50, name="Browser Ltd")
    member_add(organisation=org, username="dana", password="dana-password-1")
    good = tmp_path / "quarterly report.pdf"
    good.write_bytes(make_pdf(6))
    bad = tmp_path / "not really.pdf"
    bad.write_bytes(HTML_AS_PDF)

    with web_server(workers=2) as base:
        page.goto(f"{base}/")
        page.fill("#id_username", "dana")
        page.fill("#id_password", "dana-password-1")
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")

        page.set_input_files("input[type=file]", str(good))
        page.click("form.upload button[type=submit]")
        page.wait_for_selector(".message.success")
        assert "quarterly report.pdf" in page.inner_text(".message.success")
        assert "quarterly report.pdf" in page.inner_text("table.documents")
        assert "44 of 50 pages left" in page.inner_text("body")

        page.set_input_files("input[type=file]", str(bad))
        page.click("form.upload button[type=submit]")
        error = page.wait_for_selector(".message.error")
        assert "Only PDF and Word" in error.inner_text()
        page.screenshot(path=str(tmp_path / "documents.png"), full_page=True)

    run = ImportRun.objects.get(organisation=org)
    assert (run.source, run.status, run.reservation.pages) == ("web", "queued", 6)
