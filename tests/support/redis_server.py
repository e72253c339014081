"""A private redis-server on a free loopback port, for tests that stop and start Redis.

Never the shared server: a test may kill this one, restart it empty, or start it
with settings that lose jobs.
"""

import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager

import pytest
from redis import Redis
from redis.exceptions import RedisError

from tests.support.processes import free_port


class PrivateRedis:
    """One redis-server process at a time on a fixed port; `kill` and `start` again."""

    def __init__(self, *options: str) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("needs redis-server on PATH (Debian package redis-server)")
        self.port = free_port()
        self.options = options
        self.directory = tempfile.mkdtemp(prefix="paperlane-redis-")
        self.process: subprocess.Popen | None = None

    def url(self, db: int = 1) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        # No persistence unless a test asks: a restart comes back empty.
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", self.directory, *self.options]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except RedisError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on {self.port}") from None
                time.sleep(0.05)
            finally:
                client.close()

    def kill(self) -> None:
        """SIGKILL the server, as a crash or an OOM kill would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


@contextmanager
def private_redis(*options: str):
    server = PrivateRedis(*options)
    try:
        server.start()
        yield server
    finally:
        server.close()
