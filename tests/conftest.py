import os
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.utils import formats
from playwright.sync_api import sync_playwright

from core.redis import redis_connection
from documents.services.organisations import member_add, organisation_create
from documents.services.tokens import api_token_create
from tests.support.admin import operator_client
from tests.support.s3 import s3_storage
from tests.support.silent import silent_server


@pytest.fixture(autouse=True)
def _media_root(tmp_path, settings):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    yield
    shutil.rmtree(tmp_path / "media", ignore_errors=True)


@pytest.fixture(autouse=True)
def _local_folder_roots(tmp_path, settings):
    # Local connections may read folders under the test's own temporary folder (and its
    # MEDIA_ROOT, tmp_path/media, stays refused as in production).
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = [str(tmp_path)]


def _test_database(connection) -> bool:
    # The demo and a default deployment use database 0 (REDIS_URL's default).
    return connection.connection_pool.connection_kwargs.get("db", 0) != 0


@pytest.fixture
def redis_conn():
    connection = redis_connection()
    assert _test_database(connection), "tests flush their own Redis database, never the demo's"
    connection.flushdb()
    yield connection
    connection.flushdb()


@pytest.fixture(autouse=True)
def _clean_redis(request):
    # Every test that can enqueue gets an empty test database.
    connection = redis_connection()
    if _test_database(connection):
        connection.flushdb()


@pytest.fixture
def org(db):
    return organisation_create(slug="acme", page_limit=1000, name="Acme")


@pytest.fixture
def other_org(db):
    return organisation_create(slug="globex", page_limit=1000, name="Globex")


def _api_client(organisation, role: str = "admin") -> Client:
    # An admin's token: every right a token can have (tests of narrower roles ask).
    _, raw = api_token_create(organisation=organisation, name="test", role=role)
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


@pytest.fixture
def api(org) -> Client:
    return _api_client(org)


@pytest.fixture
def other_api(other_org) -> Client:
    return _api_client(other_org)


@pytest.fixture
def operator(org) -> Client:
    """A staff member in the Operators group, logged in."""
    return operator_client(org)


@pytest.fixture
def member_client(org) -> Client:
    # The organisation's admin: every right a member can have (tests/web/test_roles.py
    # tries the narrower roles).
    member_add(organisation=org, username="alice", password="correct horse battery", role="admin")
    client = Client()
    assert client.login(username="alice", password="correct horse battery")
    return client


@pytest.fixture
def media_files():
    """Every file under MEDIA_ROOT, relative; a test uses it to prove nothing stray was stored."""

    def listing() -> list[str]:
        root = Path(settings.MEDIA_ROOT)
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    return listing


@pytest.fixture
def s3(settings, monkeypatch):
    """The default storage in a bucket of its own on moto's S3 server (tests/support/s3.py)."""
    with s3_storage(settings, monkeypatch) as bucket:
        yield bucket


@pytest.fixture
def silent_redis(settings):
    """REDIS_URL pointed at a server that accepts connections and never answers, as a
    hung Redis does; yields the test run's own Redis URL, to switch back to."""
    reachable = settings.REDIS_URL
    with silent_server() as port:
        settings.REDIS_URL = f"redis://127.0.0.1:{port}/15"
        yield reachable


CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="session")
def browser():
    """Headless Debian Chromium driven by Playwright."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"browser tests need Chromium at {CHROMIUM} (Debian package chromium)")

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield instance
        instance.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    yield context.new_page()
    context.close()


@pytest.fixture
def site_formats():
    """The admin as config/settings.py will set it up (FORMAT_MODULE_PATH), in a time zone
    far from UTC: a time shown without seconds, or in UTC, does not match."""
    with override_settings(FORMAT_MODULE_PATH=["config.formats"], TIME_ZONE="Asia/Kathmandu"):
        # Django caches formats per language and does not reset them for this setting.
        formats.reset_format_cache()
        yield
    formats.reset_format_cache()
