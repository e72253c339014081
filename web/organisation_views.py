"""HTML: which organisation a member is working in."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from documents.models import Organisation
from documents.selectors import organisations_for_user

SESSION_ORG = "paperlane_org"


def current_organisation(request: HttpRequest) -> Organisation:
    """The organisation the member chose (or their first); 403 for a user with none."""
    organisations = list(organisations_for_user(user=request.user))
    if not organisations:
        raise PermissionDenied("You are not a member of any organisation.")
    chosen = request.session.get(SESSION_ORG)
    for organisation in organisations:
        if organisation.slug == chosen:
            return organisation
    return organisations[0]


@login_required
@require_POST
def organisation_switch_view(request: HttpRequest) -> HttpResponse:
    slug = request.POST.get("organisation", "")
    if organisations_for_user(user=request.user).filter(slug=slug).exists():
        request.session[SESSION_ORG] = slug
    return redirect("web:document_list")
