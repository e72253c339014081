"""core.isolation with real child processes: results, errors and limits.

The functions the children run are defined here, at module level, so the fork
server's children can import them as `tests.core.test_isolation`.
"""

import hashlib
import io
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from rq.timeouts import JobTimeoutException

from core.errors import UnreadableDocument
from core.isolation import (
    PROGRESS_INTERVAL,
    RETIRE_GROWTH_BYTES,
    ChildFailed,
    LimitExceeded,
    Limits,
    close_kept_child,
    configure,
    run_isolated,
)

MB = 2**20
ROOMY = Limits(memory_bytes=1024 * MB, cpu_seconds=30, wall_seconds=60)


# --- What the children run --------------------------------------------------------------


def count_pages(pages, *, progress):
    for done in range(1, pages + 1):
        progress(done, pages)
    return {"pages": pages, "pid": os.getpid()}


def count_pages_slowly(pages, seconds, *, progress):
    for done in range(1, pages + 1):
        time.sleep(seconds)
        progress(done, pages)


def raise_unreadable(*, progress):
    raise UnreadableDocument("bad", code="damaged_pdf", page=3)


class NeedsTwoArguments(Exception):
    def __init__(self, what, why):
        super().__init__(f"{what}: {why}")


def raise_unpicklable(*, progress):
    raise NeedsTwoArguments("page 2", "no font")


def allocate(megabytes, *, progress):
    chunks = [bytearray(32 * MB) for _ in range(megabytes // 32)]
    return len(chunks)


def allocate_inside_a_format_module(megabytes, *, progress):
    try:  # what the format modules do with whatever the parser raises
        allocate(megabytes, progress=progress)
    except Exception as exc:
        raise UnreadableDocument("The PDF could not be read.", code="damaged_pdf") from exc


def spin(*, progress):
    while True:
        pass


def parent_pid(*, progress):
    return os.getppid()  # a child's parent is the fork server


def sleep_after_writing_pid(pid_file, seconds, *, progress):
    with open(pid_file, "w") as fh:
        fh.write(str(os.getpid()))
    progress(0, 1)
    time.sleep(seconds)


def echo(data, *, progress):
    return data


def text_of(megabytes, *, progress):
    return "x" * (megabytes * MB)


def crash(*, progress):
    os.kill(os.getpid(), signal.SIGSEGV)


def exit_quietly(*, progress):
    sys.exit(0)


def open_files(*, progress):
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the listing's own descriptor
            pass
    return names


def digest_of_file(skip, *, file, progress):
    file.seek(skip)
    return hashlib.sha256(file.read()).hexdigest(), file.tell()


def burn_cpu(seconds, *, progress):
    started = time.process_time()
    while time.process_time() - started < seconds:
        pass
    return os.getpid()


_LEAKED = []


def leak(megabytes, *, progress):
    _LEAKED.append(bytearray(megabytes * MB))
    return os.getpid()


def allocate_then_pid(megabytes, *, progress):
    allocate(megabytes, progress=progress)
    return os.getpid()


def django_state(*, progress):
    from django.apps import apps
    from django.conf import settings

    return apps.ready, settings.SETTINGS_MODULE


# --- Helpers --------------------------------------------------------------------------


def _status_kb(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(field)


def _assert_gone(pid_file):
    pid = int(pid_file.read_text())
    assert pid != os.getpid()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _dead(pid):
    try:  # a child whose fork server went first is a zombie of init's for a moment
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# --- Tests ----------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_kept_child():
    yield
    close_kept_child()


def test_it_returns_the_result_and_relays_progress_in_order():
    seen = []

    result = run_isolated(count_pages, 5, limits=ROOMY, on_progress=lambda *p: seen.append(p))

    assert result["pages"] == 5
    assert result["pid"] != os.getpid()
    # Quick steps: the first and the last are reported, not each of those between.
    assert seen == [(1, 5), (5, 5)]


def test_slow_progress_is_reported_once_an_interval():
    seen = []
    steps = 4

    run_isolated(
        count_pages_slowly,
        steps,
        PROGRESS_INTERVAL * 1.2,
        limits=ROOMY,
        on_progress=lambda *p: seen.append(p),
    )

    assert seen == [(done, steps) for done in range(1, steps + 1)]


def test_the_child_has_django_set_up_from_the_environment():
    # The fork server's settings module, not this process's overrides (`settings` fixture).
    expected = (True, os.environ["DJANGO_SETTINGS_MODULE"])

    assert run_isolated(django_state, limits=ROOMY) == expected


def test_the_child_does_not_inherit_the_parents_open_files():
    with tempfile.NamedTemporaryFile() as held_open:  # like the worker's database socket
        files = run_isolated(open_files, limits=ROOMY)

    assert held_open.name not in files


def test_the_fork_server_cannot_be_configured_once_it_runs():
    run_isolated(count_pages, 1, limits=ROOMY)

    with pytest.raises(RuntimeError, match="running already"):
        configure(["pypdf"])


def test_a_domain_error_arrives_as_the_same_type_with_its_message_code_and_extra():
    with pytest.raises(UnreadableDocument) as caught:
        run_isolated(raise_unreadable, limits=ROOMY)

    error = caught.value
    assert (str(error), error.message, error.code, error.extra) == (
        "bad",
        "bad",
        "damaged_pdf",
        {"page": 3},
    )
    assert "raise_unreadable" in "".join(error.__notes__)  # the child's traceback


def test_an_exception_that_cannot_be_rebuilt_arrives_as_child_failed_naming_it():
    with pytest.raises(ChildFailed, match="NeedsTwoArguments: page 2: no font"):
        run_isolated(raise_unpicklable, limits=ROOMY)


def test_going_over_the_memory_limit_fails_without_the_parent_growing():
    limits = Limits(memory_bytes=512 * MB, cpu_seconds=30, wall_seconds=60)
    peak_before = _status_kb("VmHWM")

    with pytest.raises(LimitExceeded, match="used more than 512 MB of memory") as caught:
        run_isolated(allocate, 4096, limits=limits)

    assert caught.value.limit == "memory"
    assert _status_kb("VmHWM") - peak_before < 100 * 1024  # the 4 GB were never ours
    assert run_isolated(count_pages, 1, limits=limits)["pages"] == 1  # and all is well


def test_a_memory_error_wrapped_in_a_domain_error_is_still_the_memory_limit():
    limits = Limits(memory_bytes=512 * MB, cpu_seconds=30, wall_seconds=60)

    with pytest.raises(LimitExceeded) as caught:
        run_isolated(allocate_inside_a_format_module, 4096, limits=limits)

    assert caught.value.limit == "memory"


@pytest.mark.slow
def test_a_busy_loop_over_the_cpu_limit_fails_within_a_few_seconds():
    limits = Limits(memory_bytes=1024 * MB, cpu_seconds=1, wall_seconds=30)
    started = time.monotonic()

    with pytest.raises(LimitExceeded, match="used more than 1 s of CPU") as caught:
        run_isolated(spin, limits=limits)

    assert caught.value.limit == "cpu"
    assert time.monotonic() - started < 5


@pytest.mark.slow
def test_a_child_over_the_wall_time_is_killed_and_gone(tmp_path):
    limits = Limits(memory_bytes=1024 * MB, cpu_seconds=30, wall_seconds=1.5)
    pid_file = tmp_path / "pid"
    started = time.monotonic()

    with pytest.raises(LimitExceeded, match=r"took longer than 1\.5 s") as caught:
        run_isolated(sleep_after_writing_pid, str(pid_file), 60, limits=limits)

    assert caught.value.limit == "time"
    assert time.monotonic() - started < 5
    _assert_gone(pid_file)


@pytest.mark.slow
def test_an_error_in_on_progress_kills_the_child_and_propagates(tmp_path):
    pid_file = tmp_path / "pid"

    def on_progress(done, total):
        raise ValueError("the run was cancelled")

    with pytest.raises(ValueError, match="the run was cancelled"):
        run_isolated(
            sleep_after_writing_pid, str(pid_file), 60, limits=ROOMY, on_progress=on_progress
        )

    _assert_gone(pid_file)


@pytest.mark.slow
def test_a_timeout_raised_in_the_parent_while_it_waits_kills_the_child(tmp_path):
    pid_file = tmp_path / "pid"

    def rq_timeout(signum, frame):  # what RQ's death penalty does on SIGALRM
        raise JobTimeoutException("Task exceeded maximum timeout value (1 seconds)")

    def arm_alarm(done, total):  # the child is running: let the alarm go off while we wait
        signal.setitimer(signal.ITIMER_REAL, 0.2)

    previous = signal.signal(signal.SIGALRM, rq_timeout)
    try:
        with pytest.raises(JobTimeoutException):
            run_isolated(
                sleep_after_writing_pid, str(pid_file), 60, limits=ROOMY, on_progress=arm_alarm
            )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    _assert_gone(pid_file)


@pytest.mark.parametrize("where", ["small-in-memory", "memory", "spooled", "disk"])
def test_a_file_reaches_the_child_whole_and_the_callers_position_stays(where, tmp_path):
    data = os.urandom(3 * MB + 17 if where != "small-in-memory" else 5000)
    if where in ("memory", "small-in-memory"):
        file = io.BytesIO(data)
    elif where == "spooled":
        file = tempfile.SpooledTemporaryFile(max_size=10 * MB)
        file.write(data)
    else:
        file = open(tmp_path / "upload", "w+b")  # noqa: SIM115 - closed below
        file.write(data)
    file.seek(10)
    assert file.read(5) == data[10:15]  # the caller's position is 15, its buffer filled

    digest, end = run_isolated(digest_of_file, 1000, file=file, limits=ROOMY)

    assert (digest, end) == (hashlib.sha256(data[1000:]).hexdigest(), len(data))
    assert file.tell() == 15
    assert file.read() == data[15:]
    file.close()


def test_a_child_past_its_wall_clock_is_killed_at_once_not_after_a_grace(tmp_path):
    limits = Limits(memory_bytes=1024 * MB, cpu_seconds=30, wall_seconds=0.3)
    run_isolated(count_pages, 1, limits=limits)  # the fork server is up: not timed
    started = time.monotonic()

    with pytest.raises(LimitExceeded):
        run_isolated(spin, limits=limits)

    assert time.monotonic() - started < 0.3 + 0.5


def test_a_50_mb_argument_and_a_30_mb_result_make_the_round_trip():
    data = os.urandom(1024) * (50 * 1024)

    assert run_isolated(echo, data, limits=ROOMY) == data
    assert len(run_isolated(text_of, 30, limits=ROOMY)) == 30 * MB


def test_a_child_that_crashes_is_a_runtime_error_naming_the_signal():
    with pytest.raises(RuntimeError, match="killed by SIGSEGV") as caught:
        run_isolated(crash, limits=ROOMY)

    assert caught.value.exitcode == -signal.SIGSEGV


def test_a_child_that_exits_does_not_exit_the_parent():
    with pytest.raises(ChildFailed, match="exited with code 0 and no answer"):
        run_isolated(exit_quietly, limits=ROOMY)


ORPHAN_PARENT = """
import sys, django
django.setup()
from core.isolation import Limits, run_isolated
from tests.core.test_isolation import sleep_after_writing_pid
run_isolated(sleep_after_writing_pid, sys.argv[1], 60, limits=Limits(2**30, 30, 60))
"""


@pytest.mark.slow
def test_a_child_ends_when_its_parent_is_killed_outright(tmp_path):
    pid_file = tmp_path / "pid"
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_PARENT, str(pid_file)],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"]},
    )
    try:
        _wait_for(lambda: pid_file.exists() and pid_file.read_text(), 60)
    finally:
        parent.kill()  # SIGKILL: no finally of run_isolated runs
        parent.wait()

    _wait_for(lambda: _dead(int(pid_file.read_text())), 5)


# --- A child kept for several calls --------------------------------------------------------


def test_a_kept_child_serves_the_next_calls_then_is_replaced():
    pids = [run_isolated(count_pages, 1, limits=ROOMY, reuse=3)["pid"] for _ in range(4)]

    assert pids[0] == pids[1] == pids[2] != pids[3]
    _wait_for(lambda: _dead(pids[0]), 5)


def test_without_reuse_every_call_has_a_new_child():
    pids = {run_isolated(count_pages, 1, limits=ROOMY)["pid"] for _ in range(3)}

    assert len(pids) == 3


@pytest.mark.slow
def test_each_call_of_a_kept_child_has_its_own_cpu_budget():
    limits = Limits(memory_bytes=1024 * MB, cpu_seconds=1, wall_seconds=30)

    # 2.1 s of CPU in one child, no call over its 1 s budget.
    pids = {run_isolated(burn_cpu, 0.7, limits=limits, reuse=10) for _ in range(3)}

    assert len(pids) == 1


@pytest.mark.slow
def test_a_kept_child_still_stops_a_busy_loop_at_its_cpu_budget():
    limits = Limits(memory_bytes=1024 * MB, cpu_seconds=1, wall_seconds=30)
    run_isolated(burn_cpu, 0.7, limits=limits, reuse=10)

    with pytest.raises(LimitExceeded) as caught:
        run_isolated(spin, limits=limits, reuse=10)

    assert caught.value.limit == "cpu"


def test_a_kept_child_that_has_grown_is_replaced():
    grown = run_isolated(leak, RETIRE_GROWTH_BYTES // MB + 16, limits=ROOMY, reuse=10)

    assert run_isolated(count_pages, 1, limits=ROOMY, reuse=10)["pid"] != grown
    _wait_for(lambda: _dead(grown), 5)


def test_the_memory_limit_is_judged_again_in_a_new_child():
    limits = Limits(memory_bytes=640 * MB, cpu_seconds=30, wall_seconds=60)
    # The kept child holds 224 MB an earlier call left behind (under the growth that
    # replaces it); 320 MB more no longer fits in it, but fits in a new child.
    leaky = run_isolated(leak, 224, limits=limits, reuse=10)

    pid = run_isolated(allocate_then_pid, 320, limits=limits, reuse=10)

    assert pid != leaky
    with pytest.raises(LimitExceeded):  # a new child's verdict stands
        run_isolated(allocate, 4096, limits=limits, reuse=10)


@pytest.mark.slow
def test_a_kept_child_over_the_wall_time_is_killed_and_the_next_call_has_a_new_one(tmp_path):
    limits = Limits(memory_bytes=1024 * MB, cpu_seconds=30, wall_seconds=1.5)
    first = run_isolated(count_pages, 1, limits=limits, reuse=10)["pid"]
    pid_file = tmp_path / "pid"

    with pytest.raises(LimitExceeded, match="took longer"):
        run_isolated(sleep_after_writing_pid, str(pid_file), 60, limits=limits, reuse=10)

    assert int(pid_file.read_text()) == first
    _assert_gone(pid_file)
    assert run_isolated(count_pages, 1, limits=limits, reuse=10)["pid"] != first


def _in_a_forked_process(fn) -> int:
    """fn() in a process forked from this one (RQ's work horse, a worker run_workers
    forks): the number it returns."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, str(fn()).encode())
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 64)
    os.close(read)
    os.waitpid(pid, 0)
    return int(answer)


def test_a_process_forked_from_ours_leaves_our_kept_child_alone():
    kept = run_isolated(count_pages, 1, limits=ROOMY, reuse=10)["pid"]

    theirs = _in_a_forked_process(
        lambda: run_isolated(count_pages, 1, limits=ROOMY, reuse=10)["pid"]
    )

    assert theirs != kept
    assert run_isolated(count_pages, 1, limits=ROOMY, reuse=10)["pid"] == kept


@pytest.mark.slow
def test_a_process_forked_from_ours_uses_our_fork_server_or_its_own_once_it_is_gone():
    server = run_isolated(parent_pid, limits=ROOMY)

    assert _in_a_forked_process(lambda: run_isolated(parent_pid, limits=ROOMY)) == server

    def without_the_server() -> int:
        os.kill(server, signal.SIGKILL)
        _wait_for(lambda: _dead(server), 5)
        return run_isolated(parent_pid, limits=ROOMY)

    theirs = _in_a_forked_process(without_the_server)
    assert theirs not in (server, os.getpid())
    # Ours starts a new one too.
    assert run_isolated(parent_pid, limits=ROOMY) not in (server, theirs)
