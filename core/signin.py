"""Sign-in limits (django-axes): who is signing in from where, and the page a locked-out
sign-in gets. Used by both sign-in pages, `/accounts/login/` and `/admin/login/`. And
the same limit on the old password a password change asks for, on both password change
pages, `/accounts/password/` and `/admin/password_change/`.

A username that fails PAPERLANE_SIGNIN_FAILURE_LIMIT times in a row from one address
may not sign in from that address for PAPERLANE_SIGNIN_COOLOFF_SECONDS, with the right
password either; the same username from another address, and other usernames, are not
held back (so nobody can lock a person out from elsewhere). Operators lift a lockout in
the admin (Axes > Access attempts) or with `manage.py axes_reset`.
"""

import ipaddress
import math
import uuid

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_cool_off
from django.conf import settings
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.views import PasswordChangeView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.rate_limit import Rule, rate_release, rate_take

LOCKOUT_TEMPLATE = "registration/locked_out.html"


class SignInLimitBackend(AxesStandaloneBackend):
    """Refuses a sign-in while its username and address are locked out.

    Only sign-ins made by a request are limited: `authenticate()` called without one (a
    test client's `login()`, a shell) has no address, and Django's sign-in views always
    pass theirs."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def client_address(request: HttpRequest) -> str | None:
    """The address the request came from. Behind PAPERLANE_TRUSTED_PROXY_COUNT proxies that
    each append the address they were reached from to X-Forwarded-For, it is the entry the
    outermost of them wrote (what the client wrote itself, left of it, is not trusted)."""
    remote = request.META.get("REMOTE_ADDR")
    proxies = settings.PAPERLANE_TRUSTED_PROXY_COUNT
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies <= 0 or not forwarded:
        return remote
    entries = [entry.strip() for entry in forwarded.split(",")]
    candidate = entries[-min(proxies, len(entries))]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        # Not an address a proxy of ours would write: the connection's own address.
        return remote


def lockout_response(request: HttpRequest, original_response=None, credentials=None):
    """A plain page saying why signing in is refused, and for how long (429, Retry-After)."""
    cool_off = get_cool_off(request)
    seconds = math.ceil(cool_off.total_seconds()) if cool_off else None
    context = {
        "username": (credentials or {}).get("username") or request.POST.get("username", ""),
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cooloff_minutes": math.ceil(seconds / 60) if seconds else None,
    }
    response: HttpResponse = render(request, LOCKOUT_TEMPLATE, context, status=429)
    if seconds:
        response["Retry-After"] = str(seconds)
    return response


# --- Password changes -----------------------------------------------------------------
# Someone who holds a signed-in session (a browser left open) could try old passwords
# one after the other to learn the password. Wrong ones are limited as failed sign-ins
# are: at most PAPERLANE_SIGNIN_FAILURE_LIMIT in any PAPERLANE_SIGNIN_COOLOFF_SECONDS per
# person, counted by the one rate limiter; past it every attempt is refused (429,
# Retry-After), the right password too. While Redis does not answer, nothing is limited.

PASSWORD_CHANGE_KEY = "paperlane:rate:password-change:user:"


class LimitedPasswordChangeForm(PasswordChangeForm):
    """Django's password change (the old password, the new one twice, checked by
    AUTH_PASSWORD_VALIDATORS) whose wrong old passwords are limited: each attempt is
    counted before the old password is checked, and taken back when it was right."""

    retry_after: int | None = None

    def clean_old_password(self):
        rules = [
            Rule(
                key=f"{PASSWORD_CHANGE_KEY}{self.user.pk}",
                limit=settings.PAPERLANE_SIGNIN_FAILURE_LIMIT,
                window_seconds=settings.PAPERLANE_SIGNIN_COOLOFF_SECONDS,
            )
        ]
        entry = uuid.uuid4().hex
        waits = rate_take(rules=rules, entry=entry, fail_open=True)
        if waits:
            self.retry_after = max(1, math.ceil(max(waits.values())))
            minutes = math.ceil(self.retry_after / 60)
            raise ValidationError(
                f"Too many wrong passwords: try again in {minutes} minute"
                f"{'' if minutes == 1 else 's'}; until then the right one is refused too."
            )
        old = super().clean_old_password()  # a wrong one stays counted
        rate_release(rules=rules, entry=entry, fail_open=True)
        return old


class LimitedPasswordChangeView(PasswordChangeView):
    """Django's password change view with LimitedPasswordChangeForm: a refused attempt
    past the limit is answered 429 with Retry-After."""

    form_class = LimitedPasswordChangeForm

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.retry_after:
            response.status_code = 429
            response["Retry-After"] = str(form.retry_after)
        return response
