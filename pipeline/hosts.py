"""Which host a worker process belongs to, as RQ, attempts and the admin name it.

PAPERLANE_HOST_NAME (default: the machine's host name) and `run_workers --host`
set it, so two supervisors on one machine show as two hosts. Worker names are
`host.pid.queues`: the pid is the second-to-last dot-separated part.
"""

import os
import re

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Dots are allowed (fully qualified names); "@" and spaces would break lease owners
# ("job@worker") and log lines, and the length keeps lease owners within their column.
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def host_name_check(name: str) -> str:
    """`name` if it can name a host; ValueError saying what is allowed otherwise."""
    if not _HOST_NAME.fullmatch(name or ""):
        raise ValueError(
            f"host name {name!r} is not usable: use 1 to 63 letters, digits, '.', '-' or '_', "
            "starting with a letter or digit"
        )
    return name


def host_name() -> str:
    """This process's host name (PAPERLANE_HOST_NAME)."""
    try:
        return host_name_check(settings.PAPERLANE_HOST_NAME)
    except ValueError as exc:
        raise ImproperlyConfigured(f"PAPERLANE_HOST_NAME: {exc}") from None


def process_name(*parts: str) -> str:
    """`host.pid` followed by `parts` (a worker's queues), dot-separated."""
    return ".".join([host_name(), str(os.getpid()), *parts])
