"""The bounds of webhook deliveries: what the settings say (a try's time, the retry
schedule) and what follows from them."""

from datetime import timedelta

from django.conf import settings

# Of a try's time, at most this much to connect.
CONNECT_SECONDS = 5.0
# An endpoint whose every try has failed for this long is disabled (its admins see why).
DISABLE_AFTER = timedelta(days=1)
# After a rotation, tries are signed with the secret before it too for this long.
SECRET_OVERLAP = timedelta(days=1)
# Endpoints an organisation may have.
MAX_ENDPOINTS = 10


def try_seconds() -> float:
    """A try's whole time: connecting, sending, the answer."""
    return settings.PAPERLANE_WEBHOOK_TIMEOUT_SECONDS


def connect_seconds() -> float:
    return min(CONNECT_SECONDS, try_seconds())


def lease() -> timedelta:
    """A worker's hold on an endpoint, renewed as each try begins: longer than a try and
    its records, so only a worker that died loses it."""
    return timedelta(seconds=3 * try_seconds())


def turn_seconds() -> float:
    """A worker's turn at one endpoint: tries begin within it, then the next endpoint's
    turn comes (one slow receiver holds a worker at most this plus a try)."""
    return 2 * try_seconds()
