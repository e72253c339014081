"""Every page carries the Content-Security-Policy, and no page needs what it forbids: no
inline script, event attribute or style, and nothing from another host. The pages are
every URL pattern of the member site, every admin page of every registered model (its
list, add, change, history and delete pages, for a real record) and our own admin pages,
and the API docs, signed in as a member and as an operator (tests/support/routes.py)."""

import functools
import os
import re
import subprocess
import sys

import pytest
from django.contrib import admin
from django.test import Client

from documents.services.organisations import member_add
from tests.support.processes import ROOT
from tests.support.routes import Route, url_routes
from tests.support.world import world

pytestmark = pytest.mark.django_db(transaction=True)

# Another host: an absolute or protocol-relative URL in an attribute or a style sheet.
OTHER_HOST = re.compile(
    r"""(?:\b(?:src|href|action|formaction|poster|data|srcset)\s*=\s*["']?\s*|url\(\s*["']?\s*)"""
    r"""(?:[a-z][a-z0-9+.-]*:)?//""",
    re.I,
)
INLINE_SCRIPT = re.compile(
    r"<script\b(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I
)
EVENT_ATTRIBUTE = re.compile(r"<[a-z][^>]*\son[a-z]+\s*=", re.I)
STYLE_ATTRIBUTE = re.compile(r"<[a-z][^>]*\sstyle\s*=", re.I)
STYLE_ELEMENT = re.compile(r"<style\b", re.I)
# django-rq's own pages keep inline scripts and styles of their own (blocked by the
# policy; what they did is done by the admin's actions.js): checked for the header only.
THIRD_PARTY_PAGES = ("/admin/django_rq/",)


def problems(response) -> list[str]:
    found = []
    if not response.has_header("Content-Security-Policy"):
        found.append("no Content-Security-Policy header")
    if response.status_code != 200 or not response["Content-Type"].startswith("text/html"):
        return found
    html = response.content.decode()
    for name, pattern in [
        ("a reference to another host", OTHER_HOST),
        ("an inline script", INLINE_SCRIPT),
        ("an event attribute", EVENT_ATTRIBUTE),
        ("a style attribute", STYLE_ATTRIBUTE),
        ("a style element", STYLE_ELEMENT),
    ]:
        if match := pattern.search(html):
            start = max(match.start() - 60, 0)
            found.append(f"{name}: …{html[start : match.end() + 60]}…")
    return found


def _model_of(route: Route):
    """The registered model whose admin pages the route belongs to, if any."""
    for model in admin.site._registry:
        prefix = f"admin/{model._meta.app_label}/{model._meta.model_name}/"
        if route.pattern.startswith(prefix):
            return model
    return None


def _admin_urls(values: dict[str, str]) -> list[str]:
    urls = []
    for route in url_routes():
        if not route.pattern.startswith("admin/"):
            continue
        model = _model_of(route)
        names = {param.name for param in route.params}
        if names == {"object_id"} and model is not None:
            if not model._meta.managed:
                continue  # django-rq's table-less entry: its pages are its own views
            first = model._default_manager.order_by("pk").first()
            if first is None:
                continue  # nothing of that kind to show (logs switched off)
            urls.append(route.fill(lambda param, pk=first.pk: str(pk)))
        elif names <= set(values):
            urls.append(route.fill(lambda param: values[param.name]))
    return urls


def _member_urls(values: dict[str, str]) -> list[str]:
    return [
        route.fill(lambda param: values[param.name])
        for route in url_routes()
        if route.namespace != "api"
        and not route.pattern.startswith(("admin/", "metrics"))
        and {param.name for param in route.params} <= set(values)
    ]


def test_every_page_has_the_policy_and_needs_nothing_it_forbids(org, other_org, settings):
    settings.PAPERLANE_ONEDRIVE_CLIENT_ID = "walk-client-id"
    settings.PAPERLANE_ONEDRIVE_CLIENT_SECRET = "walk-secret"
    mine = world(org, processed=True)
    world(other_org, processed=True)
    member_add(organisation=org, username="alice", password="alice-pass-1")
    # A member of two: the page header then has the organisation switcher.
    member_add(organisation=other_org, username="alice")
    member_add(organisation=org, username="olga", password="olga-pass-1", staff=True)
    # A failed sign-in, so that the admin's list of access attempts has one to show.
    Client().post("/accounts/login/", {"username": "alice", "password": "wrong"})
    member, operator = Client(), Client()
    assert member.login(username="alice", password="alice-pass-1")
    assert operator.login(username="olga", password="olga-pass-1")
    values = {**mine.values(), "queue_index": "0"}

    pages = [(member, url) for url in _member_urls(values)]
    pages += [(operator, url) for url in _member_urls(values) + _admin_urls(values)]
    pages += [(Client(), "/accounts/login/"), (Client(), "/admin/login/")]
    pages += [(Client(), "/api/v1/docs"), (member, "/api/v1/docs")]
    found, shown = {}, 0
    for client, url in pages:
        response = client.get(url)
        assert response.status_code < 500, (url, response.status_code)
        shown += response.status_code == 200
        issues = problems(response)
        if url.startswith(THIRD_PARTY_PAGES):
            issues = [issue for issue in issues if "header" in issue]
        if issues:
            found[url] = issues
    assert found == {}
    assert shown >= 60


def test_the_policy_allows_this_site_only():
    policy = Client().get("/accounts/login/")["Content-Security-Policy"]

    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_the_check_finds_what_the_policy_would_block():
    class Page:
        status_code = 200
        content = (
            b'<p style="color:red" onclick="go()"><img src="https://cdn.example/x.png"></p>'
            b"<script>go()</script>"
        )

        def has_header(self, name):
            return False

        def __getitem__(self, name):
            return "text/html"

    found = problems(Page())

    assert [issue.split(":")[0] for issue in found] == [
        "no Content-Security-Policy header",
        "a reference to another host",
        "an inline script",
        "an event attribute",
        "a style attribute",
    ]


def test_with_onedrive_set_up_the_connect_form_may_lead_to_microsofts_sign_in():
    """The connect form's answer is a redirect to Microsoft's sign-in, which a browser
    follows only if form-action names it; without OneDrive the policy names no one else."""
    script = (
        "from django.conf import settings; "
        "print(settings.CONTENT_SECURITY_POLICY['DIRECTIVES']['form-action'])"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    run = functools.partial(
        subprocess.run,
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    with_onedrive = run(env={**env, "PAPERLANE_ONEDRIVE_CLIENT_ID": "app-id"})
    without = run(env={k: v for k, v in env.items() if k != "PAPERLANE_ONEDRIVE_CLIENT_ID"})

    # The shell's last line: what the script printed.
    assert (
        with_onedrive.stdout.splitlines()[-1] == "[\"'self'\", 'https://login.microsoftonline.com']"
    )
    assert without.stdout.splitlines()[-1] == "[\"'self'\"]"
