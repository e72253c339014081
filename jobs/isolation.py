"""Run work on untrusted input in a child process under resource limits.

`run_isolated(fn, *args, limits=..., **kwargs)` calls `fn` in a child made by a fork
server (never a plain fork of the worker, which has threads and an open database
connection), with RLIMIT_AS and RLIMIT_CPU set, and kills it after
`limits.wall_seconds`. Going over a limit raises `LimitExceeded` naming it; an
exception `fn` raises arrives as itself; the calling process is never harmed, and
the child is always killed and waited for.

The fork server starts on first use (or `warm_up()`) with the environment, cwd and
sys.path of that moment. It imports PRELOAD; importing this module there sets Django
up (when DJANGO_SETTINGS_MODULE is set) and imports AFTER_DJANGO, so a child starts in
about 10 ms instead of the ~0.7 s Django and the format modules take to import.
"""

import ctypes
import multiprocessing
import os
import pickle
import resource
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from typing import Any

# Imported by the fork server, in order. It skips a name it cannot import, but any other
# error stops it: modules that need Django belong in AFTER_DJANGO, which is imported
# (errors only printed) once this module has set Django up in the server.
PRELOAD: tuple[str, ...] = ("pypdf", "docx", "jobs.isolation")
AFTER_DJANGO: tuple[str, ...] = ("documents.formats",)

Progress = Callable[[int, int], None]

_context = multiprocessing.get_context("forkserver")
_preload_lock = threading.Lock()
_preload_chosen = False
_M_ARENA_MAX = -8  # glibc mallopt()


@dataclass(frozen=True)
class Limits:
    memory_bytes: int  # RLIMIT_AS of the child: its whole address space (~130 MB at start)
    cpu_seconds: int  # RLIMIT_CPU of the child (SIGXCPU, and SIGKILL a second later)
    wall_seconds: float  # the parent kills the child after this long


class LimitExceeded(Exception):
    """The child went over one of its limits; `limit` is "memory", "cpu" or "time"."""

    def __init__(self, limit: str, limits: Limits) -> None:
        self.limit = limit
        self.limits = limits
        super().__init__(
            {
                "memory": f"used more than {limits.memory_bytes // 2**20} MB of memory",
                "cpu": f"used more than {limits.cpu_seconds} s of CPU",
                "time": f"took longer than {limits.wall_seconds:g} s",
            }[limit]
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.limit, self.limits)


class ChildFailed(RuntimeError):
    """The child died without an answer (a signal, an exit code), or raised an exception
    that cannot travel as itself."""

    def __init__(self, message: str, exitcode: int | None = None) -> None:
        super().__init__(message)
        self.exitcode = exitcode

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.exitcode)


def configure(preload: Sequence[str]) -> None:
    """Have the fork server import `preload` instead of PRELOAD; only before it starts."""
    global _preload_chosen
    with _preload_lock:
        if getattr(forkserver._forkserver, "_forkserver_pid", None) is not None:
            raise RuntimeError("the fork server is running already; configure it before use")
        _context.set_forkserver_preload(list(preload))
        _preload_chosen = True


def warm_up() -> None:
    """Start the fork server and wait for its first child (at worker start, say)."""
    run_isolated(_nothing, limits=Limits(2**40, 60, 120.0))


def run_isolated(
    fn: Callable[..., Any],
    /,
    *args: Any,
    limits: Limits,
    on_progress: Progress | None = None,
    **kwargs: Any,
) -> Any:
    """Run fn(*args, **kwargs, progress=<callable>) in a child process under `limits` and
    return its result. `fn` must be a module-level function; each progress(done, total)
    of the child is an on_progress(done, total) call here, in the calling thread."""
    global _preload_chosen
    with _preload_lock:  # set_forkserver_preload() counts only before the server starts
        if not _preload_chosen:
            _context.set_forkserver_preload(list(PRELOAD))
            _preload_chosen = True
    receiver, sender = _context.Pipe(duplex=False)
    process = _context.Process(
        target=_child, args=(sender, limits, fn, args, kwargs), name="isolated", daemon=True
    )
    answer = exitcode = None
    try:
        try:
            process.start()  # the arguments travel with the process object
        except (EOFError, ConnectionError) as exc:
            raise ChildFailed("the fork server died; did a PRELOAD module fail?") from exc
        started = time.monotonic()  # not counting a start of the fork server
        sender.close()  # else the child's end would never show on this pipe
        while answer is None:
            remaining = started + limits.wall_seconds - time.monotonic()
            if remaining <= 0:
                raise LimitExceeded("time", limits)
            if receiver.poll(remaining):  # a signal handler's exception gets out here
                try:
                    message = receiver.recv()  # before join(): a big result fills the pipe
                except EOFError:  # the child is gone without an answer
                    break
                if message[0] != "progress":
                    answer = message
                elif on_progress is not None:
                    on_progress(*message[1:])
    finally:  # done, or an error, on_progress raising, RQ's timeout: the child must go
        receiver.close()
        sender.close()
        if process.pid is not None:  # None: it never started
            if answer is None and process.is_alive():
                process.kill()
            process.join()
            exitcode = process.exitcode
            process.close()
    if answer is None:
        raise _death(exitcode, limits, time.monotonic() - started)
    kind, value = answer
    if kind == "ok":
        return value
    if kind == "memory":
        raise LimitExceeded("memory", limits)
    data, summary, child_traceback = value
    try:
        error = pickle.loads(data)
    except Exception:
        error = ChildFailed(f"the isolated child raised {summary}")
    error.add_note(f"Raised in the isolated child process:\n{child_traceback}")
    raise error


def _death(exitcode: int | None, limits: Limits, elapsed: float) -> Exception:
    """What a child that died without answering ran into."""
    if exitcode == -signal.SIGXCPU or (
        exitcode == -signal.SIGKILL and elapsed >= limits.cpu_seconds
    ):
        return LimitExceeded("cpu", limits)
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        return ChildFailed(f"the isolated child was killed by {name}", exitcode)
    return ChildFailed(f"the isolated child exited with code {exitcode} and no answer", exitcode)


def _child(
    conn: Connection, limits: Limits, fn: Callable[..., Any], args: tuple, kwargs: dict
) -> None:
    """The child: a watchdog, the limits, Django, fn, then one answer to the parent."""
    _watch_parent()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    memory, hard = limits.memory_bytes, resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard != resource.RLIM_INFINITY:
        memory = min(memory, hard)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    def progress(done: int, total: int) -> None:
        conn.send(("progress", done, total))

    try:
        _setup_django()
        answer: tuple[str, Any] = ("ok", fn(*args, **kwargs, progress=progress))
    except Exception as exc:
        answer = _error_answer(exc)
    try:
        conn.send(answer)
    except MemoryError:  # pickling the result took the rest of the memory
        del answer
        conn.send(("memory", None))
    except Exception as exc:  # the result cannot be pickled
        conn.send(_error_answer(exc))
    conn.close()


def _error_answer(exc: BaseException) -> tuple[str, Any]:
    cause: BaseException | None = exc
    for _ in range(100):  # the format modules wrap every Exception, MemoryError too
        if cause is None:
            break
        if isinstance(cause, MemoryError):
            return ("memory", None)
        cause = cause.__cause__ or cause.__context__
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)  # some exceptions pickle, then fail to unpickle
    except Exception:
        data = b""
    text = "".join(traceback.format_exception(exc))
    return ("error", (data, f"{type(exc).__qualname__}: {exc}", text))


def _watch_parent() -> None:
    """End this child if its parent dies (SIGKILL leaves it no time to kill us)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    try:  # one malloc arena: a second one would add 64 MB of address space
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 1)
    except (OSError, AttributeError):
        pass
    threading.stack_size(256 * 1024)
    try:
        threading.Thread(target=_exit_at_eof, args=(parent.sentinel,), daemon=True).start()
    finally:
        threading.stack_size(0)


def _exit_at_eof(fd: int) -> None:
    while os.read(fd, 4096):  # the parent writes nothing more; EOF: it is gone
        pass
    os._exit(1)


def _nothing(*, progress: Progress) -> None:
    return None


def _setup_django() -> None:
    """Set Django up if this process is meant to have it and does not yet."""
    if os.environ.get("DJANGO_SETTINGS_MODULE"):
        import django
        from django.apps import apps

        if not apps.ready:
            django.setup()


def _in_fork_server() -> bool:
    argv = getattr(sys, "orig_argv", [])
    return len(argv) >= 2 and argv[-2] == "-c" and "multiprocessing.forkserver" in argv[-1]


if _in_fork_server():  # imported there as part of PRELOAD: Django once, for every child
    # Python 3.11 gives the server the parent's sys.path but does not apply it; the
    # project root (where the settings modules live) is the part that matters here.
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        _setup_django()
        for _name in AFTER_DJANGO if os.environ.get("DJANGO_SETTINGS_MODULE") else ():
            __import__(_name)
    except Exception:  # each child tries again and sends its error to its parent
        traceback.print_exc()
