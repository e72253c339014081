"""`run_workers` warns at start about Redis settings that lose queued jobs."""

import contextlib
import io
import os
import signal
import subprocess
import sys

import pytest
from redis import Redis

from pipeline.management.commands.run_workers import Command as RunWorkers
from pipeline.redis_check import redis_check, redis_config_warnings
from tests.support.processes import ROOT, free_port, process_env
from tests.support.redis_server import private_redis

SAFE = {"maxmemory-policy": "noeviction", "maxmemory": "0", "appendonly": "yes", "save": ""}


def test_a_safe_redis_gets_no_warning():
    assert redis_config_warnings(SAFE) == []
    # Snapshots alone are persistence too: a restart keeps what the last one saved.
    assert redis_config_warnings({**SAFE, "appendonly": "no", "save": "3600 1 300 100"}) == []


def test_an_evicting_policy_is_named_with_what_to_set():
    (warning,) = redis_config_warnings({**SAFE, "maxmemory-policy": "allkeys-lru"})
    assert "maxmemory-policy is allkeys-lru" in warning
    assert "Set maxmemory-policy noeviction" in warning
    assert "only once a memory limit is set" in warning
    (limited,) = redis_config_warnings(
        {**SAFE, "maxmemory-policy": "volatile-ttl", "maxmemory": "1073741824"}
    )
    assert "volatile-ttl" in limited and "only once" not in limited


def test_no_persistence_is_named_with_what_to_set():
    (warning,) = redis_config_warnings({**SAFE, "appendonly": "no", "save": ""})
    assert "keeps nothing on disk" in warning
    assert "appendonly yes and appendfsync everysec" in warning


def test_both_problems_give_two_warnings():
    config = {"maxmemory-policy": "allkeys-random", "maxmemory": "0", "appendonly": "no"}
    warnings = redis_config_warnings({**config, "save": " "})
    assert len(warnings) == 2


def test_values_redis_did_not_give_are_said_to_be_unchecked():
    warnings = redis_config_warnings({})
    assert len(warnings) == 2
    assert all(w.startswith("Could not read") for w in warnings)


def test_it_reads_a_real_servers_settings():
    with private_redis("--maxmemory-policy", "allkeys-lru") as server:
        warnings = redis_check(Redis.from_url(server.url()))
    assert len(warnings) == 2
    assert "allkeys-lru" in warnings[0] and "keeps nothing on disk" in warnings[1]
    with private_redis("--appendonly", "yes") as server:
        assert redis_check(Redis.from_url(server.url())) == []


def test_a_managed_redis_that_refuses_config_is_said_to_be_unchecked():
    with private_redis("--rename-command", "CONFIG", "") as server:
        (warning,) = redis_check(Redis.from_url(server.url()))
    assert warning.startswith(f"Could not check Redis at 127.0.0.1:{server.port}/1")
    assert "noeviction" in warning and "AOF" in warning


@pytest.mark.slow
def test_an_unreachable_redis_is_said_to_be_unchecked():
    port = free_port()
    (warning,) = redis_check(Redis(port=port, socket_connect_timeout=1))
    assert warning.startswith(f"Could not reach Redis at localhost:{port}/0")


def test_run_workers_writes_the_warnings_to_stderr_and_the_log(settings, caplog):
    with private_redis("--maxmemory-policy", "allkeys-lru") as server:
        settings.REDIS_URL = server.url()
        err = io.StringIO()
        RunWorkers(stdout=io.StringIO(), stderr=err)._check_redis()
    lines = err.getvalue().splitlines()
    assert len(lines) == 2 and all(line.startswith("WARNING: ") for line in lines)
    assert "maxmemory-policy is allkeys-lru" in lines[0]
    logged = [r.getMessage() for r in caplog.records if r.name.endswith("run_workers")]
    assert logged == [f"Redis check: {line.removeprefix('WARNING: ')}" for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("host", ["bad host", "a@b", ""])
def test_run_workers_refuses_a_host_name_it_cannot_use(host, db):
    # A separate process: were the name accepted, the workers would start, and are killed.
    process = subprocess.Popen(
        [sys.executable, "manage.py", "run_workers", "--host", host],
        cwd=ROOT,
        env=process_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = process.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 1
    assert f"CommandError: --host: host name {host!r} is not usable" in err
