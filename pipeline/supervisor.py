"""`run_workers`: every stage worker, the webhook workers, the scheduler and the sweeper,
kept alive.

Each is a child process. Stage workers are forked from the supervisor, which has
Django and the stages imported and the stages' warm-ups done (the extraction's fork
server, shared by every extract worker): a worker starts (or starts again after it
died) in milliseconds and at no CPU cost, where a new interpreter takes seconds of
CPU; the webhook workers, the scheduler, the sweeper and the connectors loop are new
interpreters. A child that dies is started again (with a growing pause if it keeps dying
at once).
SIGTERM or SIGINT stops everything cleanly: workers finish their current stage
(RQ's warm shutdown); after the grace period they are told again and give their
stage back at once so it resumes elsewhere; whatever is still running after
that is killed, and the lease brings its stage back.

With a RedisWatch, children that die while Redis does not answer are started
again once it does, and those that die in the seconds after it went away or
came back are started again at once (no crash loop, no growing pause); after Redis
restarts (a new, empty server) every stage worker is restarted warm, so each
registers with the new server; the sweeper delivers again what it lost.
"""

import itertools
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.db import close_old_connections, connections
from setproctitle import setproctitle

# What a stage worker runs, imported here so that every forked worker has it already.
import pipeline.management.commands.stage_worker  # noqa: F401
from pipeline.hosts import host_name
from pipeline.models import RunPriority
from pipeline.redis_watch import RedisEvent, RedisWatch
from pipeline.services.take_back import runs_take_back_from_dead_worker
from pipeline.services.transitions import Actor
from pipeline.stage_list import STAGES

logger = logging.getLogger(__name__)

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
QUICK_DEATH_SECONDS = 10
WORKER_COMMAND = "stage_worker"
WEBHOOK_WORKER_COMMAND = "webhook_worker"
# How run_workers --concurrency and PAPERLANE_STAGE_CONCURRENCY count the webhook workers.
WEBHOOKS = "webhooks"
MAX_RESTART_PAUSE = 30.0


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    pause: float = 0.0
    next_start: float = 0.0
    # Told to stop so that it starts afresh: its exit is no crash.
    rolling: bool = False

    @property
    def is_stage_worker(self) -> bool:
        return self.argv[1:3] == [MANAGE, WORKER_COMMAND]

    @property
    def forks(self) -> bool:
        """Whether start() forks it from this process rather than starting an interpreter.
        Forking is safe only while this process has no other thread (one could hold a
        lock the child would inherit held); run_workers has none."""
        return self.is_stage_worker and threading.active_count() == 1

    @property
    def stages(self) -> list[str]:
        """The stages a stage worker runs (its command's arguments before the options)."""
        if not self.is_stage_worker:
            return []
        arguments = self.argv[3:]
        return list(itertools.takewhile(lambda arg: not arg.startswith("-"), arguments))

    def start(self) -> None:
        if self.forks:
            self.process = Forked(self.argv)
        else:
            self.process = subprocess.Popen(self.argv)
        self.started_at = time.monotonic()
        logger.info("started %s (pid %s)", self.name, self.process.pid)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Forked:
    """A child forked from this process that runs one management command, `argv` being
    what would start it as a new interpreter (`python manage.py <command> …`); it has the
    parts of subprocess.Popen the supervisor uses."""

    def __init__(self, argv: list[str]) -> None:
        connections.close_all()  # the child opens its own: a socket must not be shared
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_forked(argv)  # never returns
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)  # -N: killed by signal N
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)


def _run_forked(argv: list[str]) -> None:
    code = 1
    try:
        # The supervisor's handlers are not the worker's (RQ installs its own).
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        random.seed()  # not the supervisor's sequence, shared by every sibling
        # `ps`, and whoever tells workers by their command line, see what it runs.
        setproctitle(" ".join(argv))
        sys.argv = argv[1:]
        call_command(*argv[2:])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        logger.exception("%s failed", " ".join(argv[2:]))
    finally:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def default_children(
    *, concurrency: dict[str, int] | None = None, bulk_concurrency: dict[str, int] | None = None
) -> list[Child]:
    """Per stage, its workers that take interactive work first (`concurrency`, else
    PAPERLANE_STAGE_CONCURRENCY) and those that take bulk work first (`bulk_concurrency`,
    else PAPERLANE_STAGE_BULK_CONCURRENCY); then the webhook workers (`webhooks` in
    either, one by default), the scheduler and the sweeper."""
    python = sys.executable
    children = []
    for spec in STAGES:
        counts = {
            RunPriority.INTERACTIVE: (concurrency or {}).get(spec.name, spec.concurrency),
            RunPriority.BULK: (bulk_concurrency or {}).get(spec.name, spec.bulk_concurrency),
        }
        for priority, count in counts.items():
            # Interactive-first workers keep the names they always had: extract-1, extract-2.
            label = spec.name if priority == RunPriority.INTERACTIVE else f"{spec.name}-bulk"
            for number in range(1, count + 1):
                argv = [python, MANAGE, "stage_worker", spec.name, "--prefers", priority]
                children.append(Child(f"{label}-{number}", argv))
    # Webhook deliveries to integrations (webhooks/dispatch.py).
    webhook_workers = (concurrency or {}).get(
        WEBHOOKS, settings.PAPERLANE_STAGE_CONCURRENCY.get(WEBHOOKS, 1)
    )
    for number in range(1, webhook_workers + 1):
        children.append(Child(f"webhooks-{number}", [python, MANAGE, WEBHOOK_WORKER_COMMAND]))
    children.append(Child("scheduler", [python, MANAGE, "rq_scheduler"]))
    children.append(Child("sweeper", [python, MANAGE, "sweep", "--loop"]))
    # Connected folders: syncs the due connections (connectors/loop.py).
    children.append(Child("connectors", [python, MANAGE, "connectors", "--loop"]))
    return children


class Supervisor:
    def __init__(
        self, children: list[Child], *, grace: float | None = None, watch: RedisWatch | None = None
    ) -> None:
        self.children = children
        self.watch = watch
        self.grace = settings.PAPERLANE_SHUTDOWN_GRACE_SECONDS if grace is None else grace
        self.stopping = False

    def _request_stop(self, signum, frame) -> None:
        logger.info("received %s; stopping", signal.Signals(signum).name)
        self.stopping = True

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._request_stop)
        signal.signal(signal.SIGINT, self._request_stop)
        self._warm_up_shared()
        for child in self.children:
            child.start()
        while not self.stopping:
            self._watch_redis()
            self._restart_dead()
            time.sleep(0.5)
        self.stop()

    def _warm_up_shared(self) -> None:
        """Warm up here, once, the stages of the workers this process forks: what a warm-up
        starts is then theirs from birth. The extraction's fork server is one server for
        every extract worker, and one that dies and is forked again extracts at once
        instead of spending seconds of CPU (under load) on a server of its own."""
        forked = {stage for child in self.children if child.forks for stage in child.stages}
        for spec in STAGES:
            if spec.name in forked and spec.warm_up is not None:
                try:
                    spec.warm_up()
                except Exception:  # each worker warms up for itself, as it always does
                    logger.exception("warming up %s for the workers failed", spec.name)

    @property
    def redis_up(self) -> bool:
        return self.watch is None or self.watch.up

    def redis_settled(self, now: float) -> bool:
        """Redis answers and has not gone away, come back or restarted for the time a
        quick death is judged over: a child that loses its connection mid-outage and
        notices only once Redis is back (a worker retrying its connection, a new
        interpreter still starting) died of Redis, not of a fault of its own."""
        if self.watch is None:
            return True
        return self.watch.up and now - self.watch.changed_at >= QUICK_DEATH_SECONDS

    def _watch_redis(self, *, force: bool = False) -> None:
        if self.watch is None:
            return
        event = self.watch.check(force=force)
        if event is RedisEvent.DOWN:
            logger.warning("Redis is not answering; workers that stop are restarted once it is")
        elif event is RedisEvent.BACK:
            logger.warning("Redis answers again")
        elif event is RedisEvent.RESTARTED:
            logger.warning(
                "Redis restarted (a new server): restarting every stage worker warm so each "
                "registers again; the sweeper delivers what Redis lost"
            )
            for child in self.children:
                # Only workers register in Redis; a restarted sweeper would walk the storage.
                if child.alive and {WORKER_COMMAND, WEBHOOK_WORKER_COMMAND} & set(child.argv):
                    child.rolling = True
                    child.process.send_signal(signal.SIGTERM)

    def _restart_dead(self) -> None:
        now = time.monotonic()
        dead = [child for child in self.children if not child.alive]
        if dead and any(child.next_start == 0.0 for child in dead):
            # Was it Redis? Ask now rather than trust the last check.
            self._watch_redis(force=True)
        for child in dead:
            if child.next_start == 0.0:
                code = child.process.returncode if child.process else None
                # Dying with Redis away or just back, or when told to, is no sign of a
                # broken child.
                quick = (
                    now - child.started_at < QUICK_DEATH_SECONDS
                    and not child.rolling
                    and self.redis_settled(now)
                )
                child.pause = min(max(child.pause * 2, 1.0), MAX_RESTART_PAUSE) if quick else 0.0
                child.next_start = now + child.pause
                child.rolling = False
                logger.warning(
                    "%s exited (code %s); restarting %s",
                    child.name,
                    code,
                    f"in {child.pause:.0f}s" if self.redis_up else "once Redis answers",
                )
                if WORKER_COMMAND in child.argv and child.process is not None:
                    self._take_back(child.process.pid, code)
            if now >= child.next_start and self.redis_up:
                child.next_start = 0.0
                child.start()

    def _take_back(self, pid: int, code: int | None) -> None:
        # The stage a dead worker held resumes now, not when its lease runs out.
        if code is not None and code < 0:
            why = f"its process was killed by signal {-code}"
        else:
            why = f"its process exited with code {code}"
        try:
            close_old_connections()
            taken = runs_take_back_from_dead_worker(
                worker=f"{host_name()}.{pid}.", why=why, actor=Actor(f"supervisor:{host_name()}")
            )
        except Exception:
            # The sweeper takes it back when the lease expires; never stop supervising.
            logger.exception("could not take back the stages of worker %s", pid)
            return
        if taken:
            logger.warning("took back %s stage(s) held by worker %s; they resume now", taken, pid)

    def _signal_alive(self, sig: int) -> None:
        for child in self.children:
            if child.alive:
                try:
                    child.process.send_signal(sig)
                except ProcessLookupError:
                    pass

    def _wait(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not any(child.alive for child in self.children):
                return True
            time.sleep(0.1)
        return not any(child.alive for child in self.children)

    def stop(self) -> None:
        # Warm: finish the current stage.
        self._signal_alive(signal.SIGTERM)
        if self._wait(self.grace):
            return
        # Cold: give the current stage back now (the engine releases its lease).
        logger.warning(
            "workers still busy after %ss; asking them to give their stage back", self.grace
        )
        time.sleep(1.1)  # RQ ignores a second signal within one second
        self._signal_alive(signal.SIGTERM)
        if self._wait(10):
            return
        self._signal_alive(signal.SIGKILL)
        self._wait(5)
