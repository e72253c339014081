"""The Content-Security-Policy in a real browser, against a real gunicorn, with every
request to another host refused as if the machine were offline: the API docs render
Swagger UI from our own static files, and the pages people use work, with no
violation of the policy reported."""

import pytest

from documents.services.organisations import member_add, organisation_create
from tests.support.processes import web_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class Watch:
    """What the page tried that the policy refused, and what it asked of other hosts."""

    def __init__(self, page, base: str) -> None:
        self.violations: list[str] = []
        self.elsewhere: list[str] = []
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.route("**/*", self._route(base))
        # Recorded by the browser itself, whatever the console says.
        page.add_init_script(
            "document.addEventListener('securitypolicyviolation', (e) => {"
            " (window.__violations = window.__violations || [])"
            ".push(e.violatedDirective + ' ' + e.blockedURI); });"
        )

    def _console(self, message) -> None:
        if "Content Security Policy" in message.text:
            self.violations.append(message.text)

    def _route(self, base: str):
        def handle(route):
            if route.request.url.startswith(base):
                route.continue_()
            else:
                self.elsewhere.append(route.request.url)
                route.abort("internetdisconnected")

        return handle

    def check(self, page) -> None:
        reported = page.evaluate("window.__violations || []")
        assert (self.violations, reported, self.elsewhere, self.errors) == ([], [], [], [])


def test_the_api_docs_render_swagger_ui_offline_with_no_violation(page):
    with web_server(workers=1) as base:
        watch = Watch(page, base)
        response = page.goto(f"{base}/api/v1/docs")

        assert "default-src 'self'" in response.headers["content-security-policy"]
        page.wait_for_selector("#swagger-ui .info .title")
        assert "Paperlane API" in page.inner_text("#swagger-ui .info .title")
        page.wait_for_selector(".opblock")
        assert page.locator(".opblock").count() >= 14
        # An operation opens, as a reader would use it.
        page.locator(".opblock-summary").first.click()
        page.wait_for_selector(".opblock-body")
        watch.check(page)


def test_the_member_pages_and_the_operator_pages_work_under_the_policy(page):
    acme = organisation_create(slug="acme", page_limit=50, name="Acme")
    globex = organisation_create(slug="globex", page_limit=50, name="Globex")
    member_add(organisation=acme, username="olga", password="olga-password-1", staff=True)
    member_add(organisation=globex, username="olga")

    with web_server(workers=1) as base:
        watch = Watch(page, base)
        page.goto(f"{base}/accounts/login/")
        page.fill("#id_username", "olga")
        page.fill("#id_password", "olga-password-1")
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        assert "Acme" in page.inner_text("select[name=organisation] option:checked")

        # The organisation switcher submits itself (static/js/paperlane.js): a new page.
        with page.expect_navigation(timeout=10_000):
            page.select_option("select[name=organisation]", "globex")
        assert "Globex" in page.inner_text("select[name=organisation] option:checked")
        for path in [
            "/search/",
            "/connections/",
            "/admin/",
            "/admin/pipeline/",
            f"/admin/documents/organisation/{acme.id}/change/",
        ]:
            page.goto(f"{base}{path}")
            page.wait_for_load_state("load")
        assert page.locator(".paperlane-quota svg[role=img]").count() == 1
        watch.check(page)
