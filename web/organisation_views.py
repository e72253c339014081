"""HTML: which organisation a member is working in."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from core.errors import Forbidden
from documents.models import Membership, Organisation
from documents.roles import Ability, refusal, role_allows
from documents.selectors import memberships_for_user, organisations_for_user

SESSION_ORG = "paperlane_org"


def memberships_of(request: HttpRequest) -> list[Membership]:
    """The signed-in user's memberships with their organisations, by slug; read once per
    request (the view and its page's header, web/context.py, both ask)."""
    known = getattr(request, "_paperlane_memberships", None)
    if known is None:
        known = request._paperlane_memberships = list(memberships_for_user(user=request.user))
    return known


def current_membership(request: HttpRequest) -> Membership:
    """The member's membership of the organisation they chose (or their first), with
    its organisation; 403 for a user with none."""
    memberships = memberships_of(request)
    if not memberships:
        raise PermissionDenied("You are not a member of any organisation.")
    chosen = request.session.get(SESSION_ORG)
    return next((m for m in memberships if m.organisation.slug == chosen), memberships[0])


def current_organisation(request: HttpRequest) -> Organisation:
    """The organisation the member chose (or their first); 403 for a user with none."""
    return current_membership(request).organisation


@login_required
@require_POST
def organisation_switch_view(request: HttpRequest) -> HttpResponse:
    slug = request.POST.get("organisation", "")
    if organisations_for_user(user=request.user).filter(slug=slug).exists():
        request.session[SESSION_ORG] = slug
    return redirect("web:document_list")


def forbidden(request: HttpRequest, exc: Forbidden) -> HttpResponse:
    """A 403 page that says, in the words of the refusal, what one's role does not allow."""
    membership = current_membership(request)
    context = {
        "organisation": membership.organisation,
        "organisations": organisations_for_user(user=request.user),
        "reason": exc.message,
    }
    return render(request, "web/forbidden.html", context, status=403)


def role_refusal(
    request: HttpRequest, membership: Membership, ability: Ability
) -> HttpResponse | None:
    """The 403 page when the member's role does not allow `ability`, else None: said
    before a page offers a form whose action the service would refuse."""
    if role_allows(membership.role, ability):
        return None
    return forbidden(request, refusal(membership.role, ability))
