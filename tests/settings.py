"""Test settings: PostgreSQL and a Redis database of their own, never the demo's."""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/paperlane")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
# Under pytest-xdist (`make test-fast` runs two) each worker has a Redis database of its
# own, counting down from the one given (15, 14, ...); pytest-django suffixes the test
# database likewise.
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist_worker.startswith("gw"):
    _base, _, _db = os.environ["REDIS_URL"].rpartition("/")
    os.environ["REDIS_URL"] = f"{_base}/{int(_db or 0) - int(_xdist_worker[2:])}"
os.environ.setdefault("MEDIA_ROOT", "/tmp/paperlane-test-media")
os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
# The tests' servers speak plain HTTP on loopback.
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
# Runs reach the dead letter by the try bound alone; test_retry_policy.py covers the window.
os.environ.setdefault("PAPERLANE_RETRY_MIN_WINDOW_SECONDS", "0")
os.environ.setdefault("SESSION_COOKIE_SECURE", "false")
os.environ.setdefault("CSRF_COOKIE_SECURE", "false")
# Playwright's sync API runs an event loop in the test thread; the ORM calls the
# tests make there are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Its `flush` (run after every transactional test) replaces Django's: tests/support/flushing.
INSTALLED_APPS = ["tests.support.flushing", *INSTALLED_APPS]  # noqa: F405
