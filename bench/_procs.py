"""Telling our processes apart by their command lines (/proc/<pid>/cmdline)."""


def is_stage_worker(cmdline: str) -> bool:
    """A stage worker: `manage.py stage_worker …` as started (a new interpreter, or a fork
    of run_workers titled so), or the title RQ gives a worker once it runs
    (`rq:worker:<host>.<pid>.<stage>: …`, with setproctitle installed); not a webhook
    worker (`rq:worker:<host>.<pid>.webhooks: …`)."""
    if cmdline.startswith("rq:worker:"):
        return not cmdline.split(" ", 1)[0].endswith(".webhooks:")
    return "stage_worker" in cmdline
