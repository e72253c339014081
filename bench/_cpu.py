"""CPU time from /proc: of the machine, of the processes under measurement, of this bench.

CpuMeter splits the CPU used in a window among the stage workers, the rest of
`run_workers`, gunicorn and the bench database's PostgreSQL backends (and counts the
sessions opened to that database, from pg_stat_database); machine_load says how busy
the machine is before and after a bench.
"""

import os
import time
from pathlib import Path

import psycopg
from _common import BENCH_DB, PG_ADMIN_URL

from bench._procs import is_stage_worker

CORES = os.cpu_count() or 2
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _proc_stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, own ticks, ticks of reaped children) of a live process, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()  # fields[0] is field 3 (state) of proc(5)
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, utime + stime, cutime + cstime


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _processes() -> dict[int, tuple[int, int, int, str]]:
    """Every live process: pid -> (ppid, own ticks, reaped children's ticks, command line)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _proc_stat(int(entry))
            if stat is not None:
                found[int(entry)] = (*stat, _cmdline(int(entry)))
    return found


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) ticks of all CPUs since boot, from /proc/stat."""
    values = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return total - idle, total


def _pg_sessions() -> int:
    """Sessions (connections) ever opened to the bench database, from pg_stat_database."""
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = %s", (BENCH_DB,)
        ).fetchone()
    return int(row[0]) if row else 0


def machine_load(seconds: float = 2.0) -> str:
    """The machine's load right now: busy share of all CPUs over `seconds`, and loadavg."""
    busy0, total0 = _machine_ticks()
    time.sleep(seconds)
    busy1, total1 = _machine_ticks()
    share = (busy1 - busy0) / (total1 - total0) if total1 > total0 else float("nan")
    loadavg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"CPU busy {share:.0%} over {seconds:.0f} s, load average {loadavg}"


class CpuMeter:
    """CPU seconds used by the stage workers, the rest of run_workers and gunicorn.

    Stage workers are the direct children of run_workers; a forked work horse is
    counted through its parent's cutime/cstime once it is reaped, so horses are
    never sampled themselves (that would count them twice). The extraction fork
    server (run_workers' own, which its forked workers share, or a worker's) and the
    extraction children it reaps (core/isolation.py) are "isolated". A gunicorn worker's
    fork server and the inspection children it keeps and reaps are "web": the accept path
    inspects every upload in one.
    """

    def __init__(self, supervisor_pid: int) -> None:
        self.supervisor_pid = supervisor_pid
        self.baseline: dict[tuple[str, int], int] = {}
        self.last: dict[tuple[str, int], int] = {}
        self.machine_start = (0, 0)
        self.machine_end = (0, 0)
        self.started = self.ended = 0.0
        self.own_start = self.own_end = 0.0
        self.sessions_start = self.sessions_end = 0

    def ticks(self) -> dict[tuple[str, int], int]:
        """(kind, pid) -> CPU ticks so far, for kind workers, isolated, aux, web and pg."""
        ticks: dict[tuple[str, int], int] = {}
        processes = _processes()
        gunicorn = [
            pid
            for pid, (ppid, _, _, cmd) in processes.items()
            if ppid == os.getpid() and "gunicorn" in cmd
        ]
        workers = {
            pid
            for pid, (ppid, _, _, cmd) in processes.items()
            if ppid == self.supervisor_pid and is_stage_worker(cmd)
        }
        fork_servers = {
            pid
            for pid, (ppid, _, _, cmd) in processes.items()
            if (ppid in workers or ppid == self.supervisor_pid) and "forkserver" in cmd
        }
        web_fork_servers = {
            pid
            for pid, (ppid, _, _, cmd) in processes.items()
            if processes.get(ppid, (None,))[0] in gunicorn and "forkserver" in cmd
        }
        for pid, (ppid, own, reaped, cmd) in processes.items():
            if pid in web_fork_servers or ppid in web_fork_servers:
                ticks["web", pid] = own + reaped
            elif pid in fork_servers or ppid in fork_servers:
                # A fork server (its reaped children did isolated extractions), and its
                # live children: the extraction children the workers keep.
                ticks["isolated", pid] = own + reaped
            elif pid == self.supervisor_pid or pid in gunicorn:
                # Their reaped children are counted while alive (or lost if they died).
                ticks["aux" if pid == self.supervisor_pid else "web", pid] = own
            elif ppid == self.supervisor_pid:
                ticks["workers" if is_stage_worker(cmd) else "aux", pid] = own + reaped
            elif ppid in gunicorn:
                ticks["web", pid] = own + reaped
            elif cmd.startswith("postgres: ") and f" {BENCH_DB} " in cmd:
                ticks["pg", pid] = own
        return ticks

    @staticmethod
    def _own() -> float:
        times = os.times()
        return times.user + times.system

    def start(self) -> None:
        self.baseline = self.ticks()
        self.last = dict(self.baseline)
        self.machine_start = _machine_ticks()
        self.own_start = self._own()
        self.sessions_start = _pg_sessions()
        self.started = time.monotonic()

    def sample(self, *, final: bool = False) -> None:
        self.last.update(self.ticks())
        self.machine_end = _machine_ticks()
        self.own_end = self._own()
        self.ended = time.monotonic()
        if final:
            self.sessions_end = _pg_sessions()

    def seconds(self, kind: str) -> float:
        used = sum(v - self.baseline.get(k, 0) for k, v in self.last.items() if k[0] == kind)
        return used / CLK_TCK

    @property
    def window(self) -> float:
        return self.ended - self.started

    @property
    def own(self) -> float:
        return self.own_end - self.own_start

    @property
    def machine_busy_seconds(self) -> float:
        return (self.machine_end[0] - self.machine_start[0]) / CLK_TCK

    @property
    def machine_busy(self) -> float:
        busy = self.machine_end[0] - self.machine_start[0]
        total = self.machine_end[1] - self.machine_start[1]
        return busy / total if total else float("nan")


def wait_quiet(meter: CpuMeter, *, timeout: float = 15.0) -> None:
    """Wait until run_workers' processes (scheduler, sweeper included) finish starting up."""
    deadline = time.monotonic() + timeout
    before = sum(meter.ticks().values())
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = sum(meter.ticks().values())
        if now - before <= CLK_TCK // 20:  # under 50 ms of CPU in half a second
            return
        before = now
