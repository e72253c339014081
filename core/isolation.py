"""Run work on untrusted input in a child process under resource limits.

`run_isolated(fn, *args, limits=..., **kwargs)` calls `fn` in a child made by a fork
server (never a plain fork of the worker, which has threads and an open database
connection), with RLIMIT_AS and RLIMIT_CPU set, and kills it after
`limits.wall_seconds`. Going over a limit raises `LimitExceeded` naming it; an
exception `fn` raises arrives as itself; the calling process is never harmed, and
a child that did not answer is killed and waited for. With `reuse=N` a child that
answered serves the thread's next calls, up to N (see run_isolated). With `file=` a file
goes to the child as a descriptor of its own, not as bytes through the pipe.

The fork server starts on first use (or `warm_up()`) with the environment, cwd and
sys.path of that moment. It imports PRELOAD; importing this module there sets Django
up (when DJANGO_SETTINGS_MODULE is set) and imports AFTER_DJANGO, so a child starts in
about 10 ms instead of the ~0.7 s Django and the format modules take to import. A
child costs more than its start, though: forking, the copies its first writes make,
and its exit cost a one-page PDF about 35 ms against the 3 ms of its extraction, which
is what `reuse` saves.
"""

import ctypes
import io
import math
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
from multiprocessing import forkserver, reduction
from multiprocessing.connection import Connection
from typing import Any, BinaryIO

from core.errors import caused_by

# Imported by the fork server, in order. It skips a name it cannot import, but any other
# error stops it: modules that need Django belong in AFTER_DJANGO, which is imported
# (errors only printed) once this module has set Django up in the server. `formats`
# needs no Django but is there too: the project root is on the server's sys.path only
# from then on, and an error of its import costs a traceback, not the server.
PRELOAD: tuple[str, ...] = ("pypdf", "pypdfium2", "docx", "core.isolation")
AFTER_DJANGO: tuple[str, ...] = ("formats",)

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
    """Start the fork server and wait for its first child (at worker start, say). Called
    in a process that then forks workers (run_workers), it starts the one server they
    all use: a worker forked again after dying extracts at once, instead of spending
    seconds of CPU on a server of its own."""
    run_isolated(_nothing, limits=Limits(2**40, 60, 120.0))


def run_isolated(
    fn: Callable[..., Any],
    /,
    *args: Any,
    limits: Limits,
    on_progress: Progress | None = None,
    reuse: int = 1,
    file: BinaryIO | None = None,
    **kwargs: Any,
) -> Any:
    """Run fn(*args, **kwargs, progress=<callable>) in a child process under `limits` and
    return its result. `fn` must be a module-level function; its progress(done, total)
    reports are on_progress(done, total) calls here, in the calling thread: the first,
    the last (done == total) and one every PROGRESS_INTERVAL seconds between them.

    `file`: a binary file `fn` reads, given to it as `file=`: the same bytes, open for
    reading on a descriptor of the child's own (a file on disk is not copied; one in
    memory is copied once, into a memfd, or up to _INLINE_BYTES sent through the pipe),
    whose position is not the caller's.

    `reuse`: how many calls one child may serve, one after another, before it is
    replaced (1: a new child for every call). A kept child keeps its memory limit (on
    its whole address space) and has a CPU budget of `limits.cpu_seconds` for each call;
    it is replaced early once its address space has grown by RETIRE_GROWTH_BYTES, and
    after any call that ends without an answer or with the memory limit. A call that a
    child which had served earlier calls could not finish (memory, or it died) is run
    once more in a new child: only a fresh child's verdict fails a document, never what
    earlier calls left behind."""
    global _preload_chosen
    with _preload_lock:  # set_forkserver_preload() counts only before the server starts
        if not _preload_chosen:
            _context.set_forkserver_preload(list(PRELOAD))
            _preload_chosen = True
    child = _kept_child(limits) if reuse > 1 else None
    if child is None:
        child = _Child(limits.memory_bytes)
    answer = exitcode = None
    keep = answered = False
    try:
        answer, retire = child.call(fn, args, kwargs, limits, on_progress, file)
        answered = True
        keep = answer is not None and answer[0] != "memory" and not retire
        keep = keep and child.calls < reuse
    finally:  # an answer, or an error, on_progress raising, RQ's timeout
        if keep:
            _kept.child = child
        else:
            # A child still at the call (its wall clock ran out, RQ's timeout) is killed at
            # once: waiting for it to notice would hold the caller.
            exitcode, elapsed = child.close(busy=not answered)
            if not answered or answer is None:
                _count_unanswered(child, _death(exitcode, limits, elapsed), limits, elapsed)
    if answer is None or answer[0] == "memory":
        if child.calls > 1:  # a verdict of a child that had served earlier calls
            return run_isolated(
                fn, *args, limits=limits, on_progress=on_progress, file=file, **kwargs
            )
        if answer is None:
            raise _death(exitcode, limits, elapsed)
        raise LimitExceeded("memory", limits)
    kind, value = answer
    if kind == "ok":
        return value
    data, summary, child_traceback = value
    try:
        error = pickle.loads(data)
    except Exception:
        error = ChildFailed(f"the isolated child raised {summary}")
    error.add_note(f"Raised in the isolated child process:\n{child_traceback}")
    raise error


# A child that answered its last call and may serve the next, per thread of this process.
_kept = threading.local()
# CPU seconds the children used for this thread's calls that were answered.
_spent = threading.local()


def isolated_cpu_seconds() -> float:
    """CPU seconds the children have used for this thread's calls so far: the work done
    for the thread outside its own CPU time. A call whose child died or was killed counts
    what the child had used (read from /proc before it is killed; where that cannot be
    read, its CPU limit if that is what ended it, else the call's time)."""
    return getattr(_spent, "seconds", 0.0)


RETIRE_GROWTH_BYTES = 256 * 2**20


def _share_fork_server() -> None:
    """Let a process forked from the fork server's parent use that server: RQ's work
    horse, or a stage worker forked by run_workers, which starts the server once for all
    of them (see `warm_up`). multiprocessing checks that the server lives with waitpid(),
    which only its parent may call; elsewhere the check would fail, so it is skipped
    there. Should the server be gone after all, `_forget_shared_fork_server` lets this
    process start its own."""
    server = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None or "ensure_running" in vars(server):
        return
    try:
        with open(f"/proc/{pid}/stat") as fh:
            parent = int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return  # gone: multiprocessing starts another
    if parent != os.getpid():
        server.ensure_running = lambda: None


def _forget_shared_fork_server() -> bool:
    """If this process uses a fork server it did not start, forget it (the next child
    starts one of this process's own) and return True; else False."""
    server = forkserver._forkserver
    if "ensure_running" not in vars(server):
        return False
    del server.ensure_running
    if server._forkserver_alive_fd is not None:
        os.close(server._forkserver_alive_fd)
    server._forkserver_address = server._forkserver_alive_fd = server._forkserver_pid = None
    return True


def close_kept_child() -> None:
    """End this thread's kept child, if it has one (its worker stopping)."""
    child = getattr(_kept, "child", None)
    _kept.child = None
    if child is not None and child.owner == os.getpid():
        child.close()


def _kept_child(limits: Limits) -> "_Child | None":
    child = getattr(_kept, "child", None)
    _kept.child = None
    if child is None or child.owner != os.getpid():
        # A process forked from ours (RQ's work horse) must neither use nor end its
        # parent's child: it forgets it; the parent still has it.
        return None
    if child.memory_bytes != limits.memory_bytes or not child.process.is_alive():
        child.close()
        return None
    return child


class _Child:
    """A child of the fork server and a pipe to it; it serves calls one at a time."""

    def __init__(self, memory_bytes: int) -> None:
        self.owner = os.getpid()
        self.memory_bytes = memory_bytes
        self.calls = 0
        # CPU seconds its answered calls used; /proc's count for it less this is the
        # unanswered call's.
        self.answered_cpu = 0.0
        # The unanswered call's CPU seconds, as read before the child was killed.
        self.unanswered_cpu: float | None = None
        self.started = time.monotonic()
        _share_fork_server()
        try:
            self._start(memory_bytes)
        except (EOFError, OSError) as exc:
            # A server this process shared may be gone (killed, or its parent died; its
            # socket then refuses, or is no more): one of its own, as a process that never
            # shared one would have.
            if not _forget_shared_fork_server():
                if isinstance(exc, (EOFError, ConnectionError)):
                    raise ChildFailed(DEAD_SERVER) from exc
                raise
            try:
                self._start(memory_bytes)
            except (EOFError, ConnectionError) as again:
                raise ChildFailed(DEAD_SERVER) from again

    def _start(self, memory_bytes: int) -> None:
        self.conn, theirs = _context.Pipe(duplex=True)
        self.process = _context.Process(
            target=_serve, args=(theirs, memory_bytes), name="isolated", daemon=True
        )
        try:
            self.process.start()
        except BaseException:
            self.conn.close()
            raise
        finally:
            theirs.close()  # else the child's end would never show on this pipe

    def call(
        self,
        fn: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        limits: Limits,
        on_progress,
        file: BinaryIO | None = None,
    ) -> tuple[tuple[str, Any] | None, bool]:
        """Send one call (and `file`'s descriptor) and wait: (answer, retire), or (None,
        True) if the child ended without answering. Raises LimitExceeded("time") once the
        wall clock has run out (not counting a start of the fork server); the caller then
        closes the child."""
        self.calls += 1
        self.started = time.monotonic()
        small = _small_in_memory(file)
        try:
            # The file: none, its bytes themselves (small, in memory), or a descriptor.
            sent = None if file is None else small if small is not None else True
            self.conn.send((fn, args, kwargs, limits.cpu_seconds, sent))
            if sent is True:
                descriptor = _readable_descriptor(file)
                try:
                    reduction.send_handle(self.conn, descriptor, self.process.pid)
                finally:
                    os.close(descriptor)  # the child has its own once it is sent
        except (BrokenPipeError, ConnectionResetError):
            return None, True
        while True:
            remaining = self.started + limits.wall_seconds - time.monotonic()
            if remaining <= 0:
                raise LimitExceeded("time", limits)
            if self.conn.poll(remaining):  # a signal handler's exception gets out here
                try:
                    message = self.conn.recv()  # before join(): a big result fills the pipe
                except (EOFError, ConnectionResetError):  # gone without an answer
                    return None, True
                if message[0] != "progress":
                    _spent.seconds = getattr(_spent, "seconds", 0.0) + message[3]
                    self.answered_cpu += message[3]
                    return message[:2], message[2]
                if on_progress is not None:
                    on_progress(*message[1:])

    def close(self, *, busy: bool = False) -> tuple[int | None, float]:
        """End the child and wait for it: one waiting for a call leaves at EOF, any other is
        killed (at once if `busy`, still at a call). Returns its exit code and the seconds
        since its last call began."""
        self.conn.close()
        if self.process.pid is None:  # it never started
            return None, 0.0
        if busy:
            used = _process_cpu_seconds(self.process.pid)
            if used is not None:
                self.unanswered_cpu = max(used - self.answered_cpu, 0.0)
            self.process.kill()
        self.process.join(timeout=CLOSE_GRACE_SECONDS)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        exitcode = self.process.exitcode
        self.process.close()
        return exitcode, time.monotonic() - self.started


CLOSE_GRACE_SECONDS = 1.0


def _process_cpu_seconds(pid: int) -> float | None:
    """The CPU seconds process `pid` has used, from /proc (None where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _count_unanswered(child: "_Child", error: Exception, limits: Limits, elapsed: float) -> None:
    """Count the CPU of a call the child did not answer (isolated_cpu_seconds)."""
    used = child.unanswered_cpu
    if used is None:
        over_cpu = isinstance(error, LimitExceeded) and error.limit == "cpu"
        used = limits.cpu_seconds if over_cpu else elapsed
    _spent.seconds = getattr(_spent, "seconds", 0.0) + used
# The least time between two progress reports of a child that are not its last.
PROGRESS_INTERVAL = 0.25
_COPY_BLOCK = 1024 * 1024
# A file in memory up to this size goes through the pipe: cheaper than a memfd.
_INLINE_BYTES = 1024 * 1024


def _small_in_memory(file: BinaryIO | None) -> bytes | None:
    """The bytes of `file` if it is a small one in memory, else None."""
    if not isinstance(file, io.BytesIO) or file.getbuffer().nbytes > _INLINE_BYTES:
        return None
    return file.getvalue()


def _readable_descriptor(file: BinaryIO) -> int:
    """A new descriptor reading `file`'s bytes from an open file of its own, so that the
    child's reads never move the caller's position (nor its buffer's idea of it). A file
    without a descriptor (in memory) is copied into a memfd."""
    try:
        descriptor = file.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return _memory_copy(file)
    file.flush()
    return os.open(f"/proc/self/fd/{descriptor}", os.O_RDONLY | os.O_CLOEXEC)


def _memory_copy(file: BinaryIO) -> int:
    descriptor = os.memfd_create("isolated-file", os.MFD_CLOEXEC)
    try:
        position = file.tell()
        file.seek(0)
        while block := file.read(_COPY_BLOCK):
            view = memoryview(block)
            while view:
                view = view[os.write(descriptor, view) :]
        file.seek(position)
        os.lseek(descriptor, 0, os.SEEK_SET)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


DEAD_SERVER = "the fork server died; did a PRELOAD module fail?"


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


def _serve(conn: Connection, memory_bytes: int) -> None:
    """The child: a watchdog, the limits, Django, then calls (fn, args, kwargs, CPU seconds)
    one at a time, each answered (kind, value, retire), until EOF or it retires."""
    _watch_parent()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard != resource.RLIM_INFINITY:
        memory_bytes = min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    sent_at = -math.inf

    def progress(done: int, total: int) -> None:
        # The first report, the last, and in between one per PROGRESS_INTERVAL: each
        # costs a wake-up of the parent, as much as a page of text.
        nonlocal sent_at
        now = time.monotonic()
        if done >= total or now - sent_at >= PROGRESS_INTERVAL:
            sent_at = now
            conn.send(("progress", done, total))

    born = _address_space()
    while True:
        try:
            fn, args, kwargs, cpu_seconds, sent = conn.recv()
            if sent is True:
                file = os.fdopen(reduction.recv_handle(conn), "rb")
            else:
                file = None if sent is None else io.BytesIO(sent)
        except EOFError:
            return
        if file is not None:
            kwargs = {**kwargs, "file": file}
        started = _cpu_budget(cpu_seconds)
        try:
            _setup_django()
            answer: tuple[str, Any] = ("ok", fn(*args, **kwargs, progress=progress))
        except Exception as exc:
            answer = _error_answer(exc)
        finally:
            if file is not None:
                file.close()
        retire = _address_space() - born > RETIRE_GROWTH_BYTES
        used = _cpu_used() - started
        try:
            conn.send((*answer, retire, used))
        except (BrokenPipeError, ConnectionResetError):  # the parent gave up on the call
            return
        except MemoryError:  # pickling the result took the rest of the memory
            del answer
            conn.send(("memory", None, True, used))
            return
        except Exception as exc:  # the result cannot be pickled
            conn.send((*_error_answer(exc), retire, used))
        del answer
        if retire:
            return


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_budget(seconds: int) -> float:
    """Give the coming call `seconds` of CPU. RLIMIT_CPU counts the whole life of the
    process, so the soft limit moves on from what earlier calls used; reaching it sends
    SIGXCPU, whose default action ends the process, then SIGKILL at the hard limit.
    Returns the CPU seconds used so far."""
    used = _cpu_used()
    soft = math.ceil(used) + seconds
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    return used


def _address_space() -> int:
    """This process's address space in bytes: what RLIMIT_AS bounds."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * resource.getpagesize()


def _error_answer(exc: BaseException) -> tuple[str, Any]:
    if caused_by(exc, MemoryError):  # the format modules wrap every Exception, this too
        return ("memory", None)
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
    # A Ctrl+C in the terminal reaches the whole process group: the server and its children
    # are ended by their parent (and its watchdog), never by the terminal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Python 3.11 gives the server the parent's sys.path but does not apply it; the
    # project root (where the settings modules live) is the part that matters here.
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        _setup_django()
        for _name in AFTER_DJANGO if os.environ.get("DJANGO_SETTINGS_MODULE") else ():
            __import__(_name)
    except Exception:  # each child tries again and sends its error to its parent
        traceback.print_exc()
