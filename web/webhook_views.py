"""The organisation's webhook endpoints for its admins: add one (its secret shown once, by
the page the creation redirects to), see each one's deliveries with their last answer,
send one again, send a test event, rotate the secret, disable, enable, delete. Thin
callers of webhooks/services.py, which refuse anyone but an admin of the organisation."""

import uuid

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import Forbidden, NotFound, ServiceError
from documents.models import Membership
from documents.roles import Ability
from pipeline.services.transitions import Actor
from web.organisation_views import current_membership, forbidden, role_refusal
from webhooks.models import SUBSCRIBABLE, EventType
from webhooks.selectors import delivery_get, delivery_last_tries, delivery_list, endpoint_get
from webhooks.selectors import endpoint_list as endpoints_of
from webhooks.services import (
    delivery_send_again,
    endpoint_create,
    endpoint_delete,
    endpoint_secret_rotate,
    endpoint_test_send,
    endpoint_update,
)

DELIVERIES_SHOWN = 50
# The secret just made or rotated, for the page the action redirects to: popped by that
# page's first view, so a reload shows it no more.
SESSION_NEW_SECRET = "paperlane_new_webhook_secret"


class EndpointForm(forms.Form):
    url = forms.URLField(
        label="URL",
        max_length=2000,
        assume_scheme="https",
        help_text="Where to POST the events: https://, as your receiver serves it.",
        widget=forms.URLInput(attrs={"aria-describedby": "id_url-hint"}),
    )
    events = forms.MultipleChoiceField(
        choices=[(value, f"{value}: {EventType(value).label}") for value in SUBSCRIBABLE],
        widget=forms.CheckboxSelectMultiple,
        initial=["run.succeeded", "run.failed", "run.dead_letter"],
    )
    description = forms.CharField(
        max_length=200,
        required=False,
        help_text="What receives them, e.g. “billing service”.",
        widget=forms.TextInput(attrs={"aria-describedby": "id_description-hint"}),
    )


def _admin(request: HttpRequest) -> tuple[Membership, HttpResponse | None]:
    membership = current_membership(request)
    return membership, role_refusal(request, membership, Ability.WEBHOOKS)


def _endpoint(membership: Membership, endpoint_id: uuid.UUID):
    try:
        return endpoint_get(organisation=membership.organisation, endpoint_id=endpoint_id)
    except NotFound:
        raise Http404("No such webhook endpoint in your organisation.") from None


def _with_new_secret(request: HttpRequest, endpoint_id) -> str | None:
    new = request.session.pop(SESSION_NEW_SECRET, None)
    if new is None or new["id"] != str(endpoint_id):
        return None
    return new["secret"]


@login_required
@require_http_methods(["GET", "POST"])
def webhook_list_view(request: HttpRequest) -> HttpResponse:
    membership, refused = _admin(request)
    if refused:
        return refused
    form = EndpointForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                endpoint, secret = endpoint_create(
                    organisation=membership.organisation,
                    url=form.cleaned_data["url"],
                    events=form.cleaned_data["events"],
                    description=form.cleaned_data["description"],
                    actor=Actor.of(user=request.user),
                )
            except Forbidden as exc:
                return forbidden(request, exc)
            except ServiceError as exc:
                messages.error(request, exc.message)
                status = exc.status_code
            else:
                request.session[SESSION_NEW_SECRET] = {"id": str(endpoint.id), "secret": secret}
                return redirect("web:webhook_detail", endpoint_id=endpoint.id)
        else:
            status = 400
    endpoints = endpoints_of(organisation=membership.organisation)
    context = {"form": form, "endpoints": endpoints}
    return render(request, "web/webhook_list.html", context, status=status)


@login_required
@require_http_methods(["GET"])
def webhook_detail_view(request: HttpRequest, endpoint_id: uuid.UUID) -> HttpResponse:
    membership, refused = _admin(request)
    endpoint = _endpoint(membership, endpoint_id)
    if refused:
        return refused
    deliveries = list(delivery_list(endpoint=endpoint)[:DELIVERIES_SHOWN])
    last = delivery_last_tries(deliveries)
    rows = [(delivery, last.get(delivery.id)) for delivery in deliveries]
    secret = _with_new_secret(request, endpoint.id)
    response = render(
        request,
        "web/webhook_detail.html",
        {"endpoint": endpoint, "rows": rows, "secret": secret, "shown": DELIVERIES_SHOWN},
    )
    if secret:
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def webhook_action_view(request: HttpRequest, endpoint_id: uuid.UUID, action: str) -> HttpResponse:
    """The endpoint page's buttons: test, rotate, disable, enable."""
    membership, _ = _admin(request)
    endpoint = _endpoint(membership, endpoint_id)
    actor = Actor.of(user=request.user)
    try:
        if action == "test":
            endpoint_test_send(endpoint=endpoint, actor=actor)
            messages.success(request, "A test event is on its way: it shows below.")
        elif action == "rotate":
            _, secret = endpoint_secret_rotate(endpoint=endpoint, actor=actor)
            request.session[SESSION_NEW_SECRET] = {"id": str(endpoint.id), "secret": secret}
        elif action in ("disable", "enable"):
            endpoint_update(endpoint=endpoint, actor=actor, enabled=action == "enable")
            messages.success(request, f"The endpoint is {action}d.")
        else:
            raise Http404("No such action.")
    except Forbidden as exc:
        return forbidden(request, exc)
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect("web:webhook_detail", endpoint_id=endpoint.id)


@login_required
@require_POST
def webhook_send_again_view(
    request: HttpRequest, endpoint_id: uuid.UUID, delivery_id: uuid.UUID
) -> HttpResponse:
    membership, _ = _admin(request)
    endpoint = _endpoint(membership, endpoint_id)
    try:
        delivery = delivery_get(endpoint=endpoint, delivery_id=delivery_id)
    except NotFound:
        raise Http404("No such delivery.") from None
    try:
        delivery_send_again(delivery=delivery, actor=Actor.of(user=request.user))
        messages.success(request, "The event is sent again.")
    except Forbidden as exc:
        return forbidden(request, exc)
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect("web:webhook_detail", endpoint_id=endpoint.id)


@login_required
@require_http_methods(["GET", "POST"])
def webhook_delete_view(request: HttpRequest, endpoint_id: uuid.UUID) -> HttpResponse:
    """Ask first (GET), then delete (POST)."""
    membership, refused = _admin(request)
    endpoint = _endpoint(membership, endpoint_id)
    if request.method != "POST":
        return refused or render(request, "web/webhook_delete.html", {"endpoint": endpoint})
    try:
        endpoint_delete(endpoint=endpoint, actor=Actor.of(user=request.user))
    except Forbidden as exc:
        return forbidden(request, exc)
    messages.success(request, f"The endpoint {endpoint.url} was deleted.")
    return redirect("web:webhook_list")
