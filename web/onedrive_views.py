"""OneDrive's web endpoints: connecting a folder (OAuth authorisation code flow with
PKCE) and Microsoft Graph's change notifications.

The notification endpoint answers within Graph's limits by doing almost nothing:
the validation handshake echoes the token; a notification is checked against its
clientState and only marks the connection's sync as requested (one UPDATE); the
connectors loop in `run_workers` does the Graph calls.
"""

import json
import logging
import secrets
import time

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.crypto import constant_time_compare
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from connectors.base import ProviderBusy, ProviderError
from connectors.onedrive import client_state_connection
from connectors.onedrive_graph import OneDriveConfig, authorize_url, pkce_pair
from connectors.services import connection_connect_onedrive_signed_in, connection_request_sync
from core.errors import Forbidden
from documents.roles import Ability
from documents.selectors import organisations_for_user
from pipeline.services.transitions import Actor
from web.organisation_views import current_membership, forbidden, role_refusal

logger = logging.getLogger(__name__)

SESSION_KEY = "paperlane_onedrive_connect"
# A sign-in started longer ago than this is not finished; the person starts again.
STATE_SECONDS = 900
# Graph's validation tokens are short; anything longer is not from Graph.
MAX_VALIDATION_TOKEN = 1024
# One POST carries a batch of notifications; more than this is not Graph's.
MAX_NOTIFICATIONS = 1000
# A full batch of Graph's notifications is far smaller.
MAX_NOTIFICATION_BYTES = 1024 * 1024
# Who asks for a sync when Graph says something changed: the system, checked by the
# notification's clientState rather than by a role.
NOTIFICATION = Actor("onedrive-notification")


class ConnectForm(forms.Form):
    folder = forms.CharField(
        label="OneDrive folder",
        max_length=1000,
        initial="/",
        help_text="The folder's path in your OneDrive, e.g. /Documents/Contracts (/ for all).",
    )

    def clean_folder(self) -> str:
        parts = [p for p in self.cleaned_data["folder"].strip().split("/") if p]
        if any(p in (".", "..") or any(ord(c) < 32 for c in p) for p in parts):
            raise forms.ValidationError("Write the folder's path as it is shown in OneDrive.")
        return "/" + "/".join(parts)


def _redirect_uri(request: HttpRequest) -> str:
    return settings.PAPERLANE_ONEDRIVE_REDIRECT_URI or request.build_absolute_uri(
        reverse("connections:onedrive_callback")
    )


@login_required
def onedrive_connect_view(request: HttpRequest) -> HttpResponse:
    """An admin of the organisation names a folder and is sent to Microsoft to sign in
    and consent."""
    membership = current_membership(request)
    organisation = membership.organisation
    if refused := role_refusal(request, membership, Ability.CONNECTIONS):
        return refused
    config = OneDriveConfig.from_settings()
    form = ConnectForm(request.POST or None)
    context = {
        "organisation": organisation,
        "organisations": organisations_for_user(user=request.user),
        "form": form,
        "configured": config.configured,
    }
    if not config.configured:
        return render(request, "web/onedrive_connect.html", context, status=503)
    if request.method == "POST" and form.is_valid():
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(32)
        # The state is bound to this session, this person and this organisation.
        request.session[SESSION_KEY] = {
            "state": state,
            "verifier": verifier,
            "organisation_id": organisation.id,
            "user_id": request.user.pk,
            "folder": form.cleaned_data["folder"],
            "started": time.time(),
        }
        return redirect(
            authorize_url(
                config=config,
                state=state,
                code_challenge=challenge,
                redirect_uri=_redirect_uri(request),
            )
        )
    return render(request, "web/onedrive_connect.html", context)


def _refused(request: HttpRequest, message: str, status: int = 400) -> HttpResponse:
    messages.error(request, message)
    context = {"form": ConnectForm(), "configured": True}
    return render(request, "web/onedrive_connect.html", context, status=status)


@login_required
def onedrive_callback_view(request: HttpRequest) -> HttpResponse:
    """Microsoft sends the person back here with a code: exchange it, find the folder,
    and make (or reconnect) the organisation's connection."""
    pending = request.session.pop(SESSION_KEY, None)
    state = request.GET.get("state", "")
    if (
        not isinstance(pending, dict)
        or not constant_time_compare(state, pending.get("state", ""))
        or pending.get("user_id") != request.user.pk
        or time.time() - pending.get("started", 0) > STATE_SECONDS
    ):
        return _refused(request, "This sign-in is not the one started here; connect again.")
    organisation = (
        organisations_for_user(user=request.user).filter(id=pending["organisation_id"]).first()
    )
    if organisation is None:
        return _refused(request, "You are no longer a member of that organisation.", 403)
    if request.GET.get("error"):
        reason = request.GET.get("error_description") or request.GET["error"]
        return _refused(request, f"Microsoft did not connect OneDrive: {reason[:300]}")
    try:
        connection = connection_connect_onedrive_signed_in(
            organisation=organisation,
            code=request.GET.get("code", ""),
            code_verifier=pending["verifier"],
            redirect_uri=_redirect_uri(request),
            folder_path=pending["folder"],
            created_by=request.user,
        )
    except ProviderBusy:
        return _refused(request, "Microsoft is busy; connect the folder again in a minute.")
    except ProviderError as exc:
        return _refused(request, exc.message)
    except Forbidden as exc:  # no longer an admin since the sign-in started
        return forbidden(request, exc)
    messages.success(
        request, f"OneDrive folder {connection.folder_path} is connected; its documents follow."
    )
    return redirect("connections:detail", connection_id=connection.id)


@csrf_exempt
@require_POST
def onedrive_notifications_view(request: HttpRequest) -> HttpResponse:
    """Microsoft Graph's change notifications.

    - `?validationToken=` (subscription created or renewed): the token, text/plain, 200.
    - A batch of notifications: each is trusted only if its clientState is ours for the
      connection it names (Graph: "if there's a mismatch, don't consider the change
      notification as valid"); a valid one marks that connection's sync requested.
      202 if any was valid. If none was, 403: the sender is not Graph for any
      subscription of ours, and it learns nothing more from the refusal.
    """
    token = request.GET.get("validationToken")
    if token is not None:
        if not token or len(token) > MAX_VALIDATION_TOKEN:
            return HttpResponse(status=400)
        return HttpResponse(token, content_type="text/plain", status=200)
    try:
        if int(request.META.get("CONTENT_LENGTH") or 0) > MAX_NOTIFICATION_BYTES:
            return HttpResponse(status=413)
        notifications = json.loads(request.body)["value"]
        if not isinstance(notifications, list) or len(notifications) > MAX_NOTIFICATIONS:
            raise ValueError
    # RecursionError: JSON nested deeper than the parser goes.
    except (ValueError, KeyError, TypeError, RecursionError):
        return HttpResponse(status=400)
    valid: set[int] = set()
    refused = 0
    for notification in notifications:
        state = notification.get("clientState") if isinstance(notification, dict) else None
        connection_id = client_state_connection(state) if isinstance(state, str) else None
        if connection_id is None:
            refused += 1
        else:
            valid.add(connection_id)
    if refused:
        logger.warning("refused %d OneDrive notification(s) with a wrong clientState", refused)
    for connection_id in valid:
        connection_request_sync(connection_id=connection_id, actor=NOTIFICATION)
    return HttpResponse(status=202 if valid else 403)
