"""HTML pages for members: their organisation's connected folders, their syncs, history
and the files that failed; pause, resume, "sync now", disconnect. Thin callers of
services."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_POST

from connectors.models import ConnectorImport
from connectors.onedrive_graph import OneDriveConfig
from connectors.selectors import connection_get, connection_list
from connectors.services import (
    SYNCS_ALWAYS_KEPT,
    connection_create_local,
    connection_disconnect,
    connection_pause,
    connection_request_sync,
    connection_resume,
)
from connectors.sync import connection_refresh_imports
from core.errors import Forbidden, NotFound, ServiceError
from documents.roles import Ability, abilities
from documents.selectors import organisations_for_user
from pipeline.models import ImportRun
from pipeline.services.people import run_retry
from pipeline.services.transitions import Actor
from web.organisation_views import current_membership, forbidden, role_refusal

FAILED_ROWS = 100
HISTORY_ROWS = 50


class LocalFolderForm(forms.Form):
    path = forms.CharField(label="Folder on this server", max_length=1024)


def onedrive_connect_url() -> str | None:
    """The OneDrive connect page, where that connector is installed and set up (its app
    registered with Microsoft); None elsewhere: no page offers what would end in a 503."""
    if not OneDriveConfig.from_settings().configured:
        return None
    try:
        return reverse("connections:onedrive_connect")
    except NoReverseMatch:
        return None


def _page_context(request: HttpRequest, membership) -> dict:
    return {
        "organisation": membership.organisation,
        "organisations": organisations_for_user(user=request.user),
        "can": abilities(membership.role),
    }


@login_required
def connection_list_view(request: HttpRequest) -> HttpResponse:
    membership = current_membership(request)
    organisation = membership.organisation
    context = {
        **_page_context(request, membership),
        "connections": list(connection_list(organisation=organisation)),
        "onedrive_connect_url": onedrive_connect_url(),
        # A server path is the operator's choice, not a member's.
        "local_form": LocalFolderForm() if _may_connect_server_folders(request.user) else None,
    }
    return render(request, "web/connection_list.html", context)


@login_required
def connection_detail_view(request: HttpRequest, connection_id: int) -> HttpResponse:
    membership = current_membership(request)
    connection = _get(membership.organisation, connection_id)
    failed = (
        ConnectorImport.objects.filter(connection=connection, state=ConnectorImport.State.FAILED)
        .select_related("run")
        .order_by("-updated_at", "-id")[:FAILED_ROWS]
    )
    context = {
        **_page_context(request, membership),
        "connection": connection,
        "syncs": connection.syncs.all()[:SYNCS_ALWAYS_KEPT],
        "events": connection.events.select_related("user")[:HISTORY_ROWS],
        "failed": failed,
        "onedrive_connect_url": onedrive_connect_url(),
    }
    return render(request, "web/connection_detail.html", context)


def _get(organisation, connection_id: int):
    try:
        return connection_get(organisation=organisation, connection_id=connection_id)
    except NotFound:
        # Another organisation's connection is as unknown as one that never was.
        raise Http404("No such connection in your organisation.") from None


@login_required
@require_POST
def connection_action_view(request: HttpRequest, connection_id: int, action: str) -> HttpResponse:
    """Pause, resume (an admin) or "sync now" (a member) one of the organisation's
    connections; the services check who may."""
    membership = current_membership(request)
    connection = _get(membership.organisation, connection_id)
    try:
        actor = Actor.of(user=request.user)
        if action == "pause":
            connection_pause(connection=connection, reason=f"paused by {request.user}", actor=actor)
            messages.success(request, "The connection is paused; nothing new is imported.")
        elif action == "resume":
            connection_resume(connection=connection, actor=actor)
            messages.success(request, "The connection is active again and syncs now.")
        else:
            connection_request_sync(connection_id=connection.id, actor=actor)
            if connection.status in ("active", "error"):
                messages.success(request, "A sync will start in a moment.")
            else:
                messages.warning(
                    request,
                    f"The connection is {connection.get_status_display().lower()}: "
                    "it syncs once it is resumed.",
                )
    except Forbidden as exc:
        return forbidden(request, exc)
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect("connections:detail", connection_id=connection.id)


@login_required
def connection_disconnect_view(request: HttpRequest, connection_id: int) -> HttpResponse:
    """Disconnect one of the organisation's connections: what it means first (GET), then
    done (POST). An admin's."""
    membership = current_membership(request)
    connection = _get(membership.organisation, connection_id)
    # Said before the page offers a button that would be refused.
    if refused := role_refusal(request, membership, Ability.CONNECTIONS):
        return refused
    if request.method != "POST":
        context = {**_page_context(request, membership), "connection": connection}
        return render(request, "web/connection_disconnect.html", context)
    try:
        connection = connection_disconnect(connection=connection, actor=Actor.of(user=request.user))
    except Forbidden as exc:
        return forbidden(request, exc)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"{connection.folder_path} is disconnected: nothing more is imported from it, "
            "and its documents stay.",
        )
    return redirect("connections:detail", connection_id=connection.id)


@login_required
@require_POST
def import_retry_view(request: HttpRequest, connection_id: int, import_id: int) -> HttpResponse:
    """Retry the run of a file that failed (e.g. over quota, after the limit was raised)."""
    connection = _get(current_membership(request).organisation, connection_id)
    run = ImportRun.objects.filter(
        connector_import__id=import_id, connector_import__connection=connection
    ).first()
    if run is None:
        raise Http404("No such file in this connection.")
    try:
        change = run_retry(run=run, actor=Actor.of(user=request.user))
    except Forbidden as exc:
        return forbidden(request, exc)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        connection_refresh_imports(connection=connection)
        messages.success(request, f"{run.connector_import.path}: {change.note}.")
    return redirect("connections:detail", connection_id=connection.id)


def _may_connect_server_folders(user) -> bool:
    """Staff allowed to add connections (the Operators group is): reading the server's
    folders is an operator's decision, not every staff account's."""
    return user.is_staff and user.has_perm("connectors.add_connection")


@login_required
@require_POST
def connection_create_local_view(request: HttpRequest) -> HttpResponse:
    """Operators connect a folder of this server to the organisation they work in."""
    if not _may_connect_server_folders(request.user):
        raise PermissionDenied("Only operators connect folders of the server.")
    organisation = current_membership(request).organisation
    form = LocalFolderForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the folder's path.")
        return redirect("connections:list")
    try:
        connection = connection_create_local(
            organisation=organisation, path=form.cleaned_data["path"], created_by=request.user
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("connections:list")
    messages.success(request, f"{connection.folder_path} is connected.")
    return redirect("connections:detail", connection_id=connection.id)
