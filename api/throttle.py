"""Requests per API token: at most PAPERLANE_API_RATE_PER_MINUTE in any minute (0: no
limit). Past it, `429 {detail, code: "rate_limited"}` with `Retry-After`. Counted in
Redis by the one rate limiter (core/rate_limit.py); while Redis does not answer, requests
are not limited."""

import math
import threading

from django.conf import settings
from ninja.throttling import BaseThrottle

from core.rate_limit import Rule, rate_take

# A key of its own (the earlier limiter's kept members of another form under
# "paperlane:api-rate:token:"): web processes of two releases side by side during a
# deploy never read each other's windows.
KEY = "paperlane:rate:api-token:"
# PAPERLANE_API_RATE_PER_MINUTE counts over a minute.
WINDOW_SECONDS = 60


class TokenRateThrottle(BaseThrottle):
    """Checked by ninja after authentication, on every operation of the API."""

    def __init__(self) -> None:
        # One instance serves every thread; ninja asks wait() right after allow_request().
        self._last = threading.local()

    def allow_request(self, request) -> bool:
        self._last.wait = None
        limit = settings.PAPERLANE_API_RATE_PER_MINUTE
        token = getattr(request, "api_token", None)
        if limit <= 0 or token is None:
            return True
        rule = Rule(key=f"{KEY}{token.id}", limit=limit, window_seconds=WINDOW_SECONDS)
        refused = rate_take(rules=[rule], fail_open=True)
        self._last.wait = max(refused.values(), default=None)
        return not refused

    def wait(self) -> int | None:
        # Whole seconds, at least one: ninja's Retry-After and our body's retry_after agree.
        wait = getattr(self._last, "wait", None)
        return None if wait is None else max(1, math.ceil(wait))
