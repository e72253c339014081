"""Production settings: no published secret key, and a clean `check --deploy`."""

import os
import secrets
import subprocess
import sys

from cryptography.fernet import Fernet

from tests.support.processes import ROOT


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        key: value
        for key, value in os.environ.items()
        # Only what a production environment sets: none of the test run's settings.
        if not key.startswith(
            ("SECURE_", "SESSION_", "CSRF_", "DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")
        )
    }
    environment.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        # Never connected to: `check` reads the settings only.
        DATABASE_URL="postgres://postgres@127.0.0.1:1/paperlane",
        **env,
    )
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_debug_it_refuses_to_start_without_a_secret_key():
    result = _manage("check")

    assert result.returncode != 0
    assert "Set SECRET_KEY" in result.stderr


def test_a_development_run_starts_without_a_secret_key():
    assert _manage("check", DEBUG="true").returncode == 0


def test_the_single_connector_key_of_earlier_versions_alone_refuses_to_start():
    old_key = Fernet.generate_key().decode()

    refused = _manage("check", DEBUG="true", PAPERLANE_CONNECTOR_KEY=old_key)
    beside_the_list = _manage(
        "check", DEBUG="true", PAPERLANE_CONNECTOR_KEY=old_key, PAPERLANE_CONNECTOR_KEYS=old_key
    )

    assert refused.returncode != 0
    assert "set PAPERLANE_CONNECTOR_KEYS to the same key" in refused.stderr
    assert beside_the_list.returncode == 0, beside_the_list.stderr


def test_production_settings_pass_the_deployment_checks():
    result = _manage(
        "check", "--deploy", "--fail-level", "WARNING", SECRET_KEY=secrets.token_urlsafe(50)
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_every_call_to_s3_has_a_short_budget(settings):
    config = settings.AWS_S3_CLIENT_CONFIG

    assert (config.connect_timeout, config.read_timeout) == (2, 5)
    assert config.retries == {"max_attempts": 2, "mode": "standard"}
