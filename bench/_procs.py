"""Telling our processes apart by their command lines (/proc/<pid>/cmdline)."""


def is_stage_worker(cmdline: str) -> bool:
    """A stage worker: `manage.py stage_worker …` as started (a new interpreter, or a fork
    of run_workers titled so), or the title RQ gives a worker once it runs
    (`rq:worker:<host>.<pid>.<stage>: …`, with setproctitle installed)."""
    return "stage_worker" in cmdline or cmdline.startswith("rq:worker:")
