"""Which run, stage and attempt a log line is about, whichever code wrote it.

The engine sets the context around a stage (`run_log_context`); a filter on
the log handlers copies it onto every record (`run_id`, `stage`, `attempt`,
and `run_context`, all three as one string or ""), so stage code, services and
libraries need not repeat it. Workers install the filter and a format that
prints it (`install_worker_logging`, called by `stage_worker`).
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_context: ContextVar[dict[str, str] | None] = ContextVar("paperlane_log_context", default=None)

# Context field -> how a log line names it: "[run=… stage=extract attempt=2]".
_SHOWN = (("run_id", "run"), ("stage", "stage"), ("attempt", "attempt"))
WORKER_FORMAT = "%(asctime)s %(levelname)s %(name)s%(run_context)s: %(message)s"


@contextmanager
def run_log_context(**fields: object) -> Iterator[None]:
    """Add `fields` (run_id, stage, attempt) to every log line written inside."""
    merged = {**(_context.get() or {}), **{k: str(v) for k, v in fields.items()}}
    token = _context.set(merged)
    try:
        yield
    finally:
        _context.reset(token)


def current_log_context() -> dict[str, str]:
    return dict(_context.get() or {})


class RunContextFilter(logging.Filter):
    """Copies the run context onto each record; "-" for a field that is not set."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _context.get() or {}
        record.run_id = context.get("run_id", "-")
        record.stage = context.get("stage", "-")
        record.attempt = context.get("attempt", "-")
        shown = [f"{label}={context[key]}" for key, label in _SHOWN if key in context]
        record.run_context = f" [{' '.join(shown)}]" if shown else ""
        return True


def install_worker_logging() -> None:
    """Print the run context on every root handler's lines (once per process)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RunContextFilter) for f in handler.filters):
            handler.addFilter(RunContextFilter())
            handler.setFormatter(logging.Formatter(WORKER_FORMAT))
