"""Worker processes are named after PAPERLANE_HOST_NAME (run_workers --host)."""

import os
import socket

import pytest
from django.core.exceptions import ImproperlyConfigured

from pipeline.engine import worker_name
from pipeline.hosts import host_name, host_name_check, process_name


def test_the_machine_name_is_the_default():
    from config import settings as project_settings

    assert project_settings.PAPERLANE_HOST_NAME == os.environ.get(
        "PAPERLANE_HOST_NAME", socket.gethostname()
    )


@pytest.mark.parametrize("name", ["web-1", "ip-10-0-3-17.eu-west-1.compute.internal", "a", "H_2"])
def test_usable_host_names_pass(name):
    assert host_name_check(name) == name


@pytest.mark.parametrize("name", ["", "two words", "job@host", ".dot", "x" * 64, "tab\t"])
def test_unusable_host_names_are_refused(name):
    with pytest.raises(ValueError, match="not usable"):
        host_name_check(name)


def test_process_names_start_with_the_host_and_pid(settings):
    settings.PAPERLANE_HOST_NAME = "box-b"
    assert process_name("embed") == f"box-b.{os.getpid()}.embed"
    # Outside an RQ job (a stage run directly) the engine names the process the same way.
    assert worker_name() == f"box-b.{os.getpid()}"
    assert host_name() == "box-b"


def test_a_bad_setting_is_a_configuration_error(settings):
    settings.PAPERLANE_HOST_NAME = "my laptop"
    with pytest.raises(ImproperlyConfigured, match="PAPERLANE_HOST_NAME"):
        process_name()
