"""The organisation's API tokens for its admins: make one (its secret shown once, by the
page the creation redirects to), see who made each and when it was last used, revoke one.
Thin callers of the token services, which refuse anyone but an admin of the
organisation."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from core.errors import Forbidden, NotFound, ServiceError
from documents.models import Membership
from documents.roles import Ability
from documents.selectors import api_token_get, api_token_list
from documents.services.tokens import (
    TOKEN_NAME_MAX,
    api_token_create_by_member,
    api_token_revoke_by_member,
)
from web.organisation_views import current_membership, forbidden, role_refusal

TOKENS_SHOWN = 200
# The token just made, for the page the creation redirects to: its id and secret, popped
# by that page's first view, so a reload shows it no more and makes no second token.
SESSION_NEW_TOKEN = "paperlane_new_token"


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=TOKEN_NAME_MAX,
        help_text="What will use it, e.g. “billing export”.",
        widget=forms.TextInput(attrs={"aria-describedby": "id_name-hint"}),
    )
    role = forms.ChoiceField(
        choices=Membership.Role.choices,
        initial=Membership.Role.MEMBER,
        widget=forms.Select(attrs={"aria-describedby": "id_role-hint"}),
        help_text="Viewer: read and search. Member: also upload, retry and cancel. "
        "Admin: also delete documents and manage tokens.",
    )


def _page(request: HttpRequest, membership: Membership, form: TokenForm, **extra) -> HttpResponse:
    tokens = api_token_list(organisation=membership.organisation).select_related(
        "created_by", "revoked_by"
    )
    context = {"form": form, "tokens": tokens[:TOKENS_SHOWN], "count": tokens.count(), **extra}
    return render(request, "web/token_list.html", context, status=extra.get("status", 200))


@login_required
@require_http_methods(["GET", "POST"])
def token_list_view(request: HttpRequest) -> HttpResponse:
    """The tokens, and the form that makes one; after it, the page the form redirects to
    shows the new secret, once."""
    membership = current_membership(request)
    if refused := role_refusal(request, membership, Ability.TOKENS):
        return refused
    if request.method != "POST":
        return _page_after_creation(request, membership)
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, membership, form, status=400)
    try:
        token, secret = api_token_create_by_member(
            organisation=membership.organisation,
            user=request.user,
            name=form.cleaned_data["name"],
            role=form.cleaned_data["role"],
        )
    except Forbidden as exc:
        return forbidden(request, exc)
    except ServiceError as exc:
        messages.error(request, exc.message)
        return _page(request, membership, form, status=exc.status_code)
    # Shown by the page redirected to (a reload of this POST would make another token); the
    # secret waits in the session for that one view, and is written nowhere else.
    request.session[SESSION_NEW_TOKEN] = {"id": token.id, "secret": secret}
    return redirect("web:token_list")


def _page_after_creation(request: HttpRequest, membership: Membership) -> HttpResponse:
    """The tokens page, with the secret of the token just made if this is the first view
    since (in the organisation it was made in)."""
    new = request.session.pop(SESSION_NEW_TOKEN, None)
    if new is None:
        return _page(request, membership, TokenForm())
    try:
        token = api_token_get(organisation=membership.organisation, token_id=new["id"])
    except NotFound:  # switched to another organisation meanwhile
        return _page(request, membership, TokenForm())
    response = _page(request, membership, TokenForm(), created=token, secret=new["secret"])
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    """Ask first (GET), then revoke (POST): integrations using the token stop working."""
    membership = current_membership(request)
    try:
        token = api_token_get(organisation=membership.organisation, token_id=token_id)
    except NotFound:
        raise Http404("No such token in your organisation.") from None
    if request.method != "POST":
        if refused := role_refusal(request, membership, Ability.TOKENS):
            return refused
        return render(request, "web/token_revoke.html", {"token": token})
    try:
        api_token_revoke_by_member(token=token, user=request.user)
    except Forbidden as exc:
        return forbidden(request, exc)
    messages.success(request, f"The token “{token.name or token.prefix}” was revoked.")
    return redirect("web:token_list")
