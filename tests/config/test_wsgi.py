"""A web process is ready before its first request: what Django builds lazily is built
when gunicorn loads the application."""

import subprocess
import sys

from tests.support.processes import ROOT

PROBE = """
import sys
import config.wsgi
from django.urls import get_resolver
print("config.urls" in sys.modules, "api.documents" in sys.modules, get_resolver()._populated)
"""


def test_loading_the_application_builds_the_urlconf_and_the_reverse_map():
    # A fresh interpreter: in the test process the URLconf is loaded already.
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    assert result.stdout.split() == ["True", "True", "True"]
