"""The organisation's members: every member reads who is in it, and its admins add a new
member's account (username, password, role). A thin caller of `member_create`, which
refuses anyone but an admin of the organisation."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from core.errors import Forbidden, ServiceError
from documents.models import Membership, Organisation
from documents.roles import Ability, role_allows
from documents.selectors import membership_list
from documents.services.organisations import member_create
from web.organisation_views import current_membership, forbidden, memberships_of

MEMBERS_SHOWN = 500


class MemberForm(forms.Form):
    # The organisation the form was shown for: a switch made in another tab meanwhile
    # does not send the new member elsewhere.
    organisation = forms.IntegerField(widget=forms.HiddenInput)
    username = forms.CharField(
        max_length=150,
        help_text="What they sign in with: letters, digits and @/./+/-/_.",
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "autocapitalize": "none", "spellcheck": "false"}
        ),
    )
    password = forms.CharField(
        strip=False,
        help_text="Their first password; give it to them yourself. They can change it under "
        "Password once signed in.",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )
    role = forms.ChoiceField(
        choices=Membership.Role.choices,
        initial=Membership.Role.MEMBER,
        help_text="Viewer: read and search. Member: also upload, retry and cancel. "
        "Admin: also delete documents, manage tokens, folders and members.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("username", "password", "role"):
            self.fields[name].widget.attrs["aria-describedby"] = f"id_{name}-hint"


def _page(
    request: HttpRequest, membership: Membership, form: MemberForm | None, *, status: int = 200
) -> HttpResponse:
    members = membership_list(organisation=membership.organisation)
    context = {
        "organisation": membership.organisation,
        "members": members[:MEMBERS_SHOWN],
        "count": members.count(),
        "form": form,
    }
    return render(request, "web/members.html", context, status=status)


def _chosen_organisation(request: HttpRequest, organisation_id: int) -> Organisation:
    """One of the person's organisations; another one is as unknown as one that never was."""
    for each in memberships_of(request):
        if each.organisation.id == organisation_id:
            return each.organisation
    raise Http404("No such organisation of yours.")


@login_required
@require_http_methods(["GET", "POST"])
def members_view(request: HttpRequest) -> HttpResponse:
    """The members; for an admin, the form that adds one (POST: made, then back here)."""
    membership = current_membership(request)
    may_add = role_allows(membership.role, Ability.MEMBERS)
    if request.method != "POST":
        initial = {"organisation": membership.organisation.id}
        return _page(request, membership, MemberForm(initial=initial) if may_add else None)
    form = MemberForm(request.POST)
    if not form.is_valid():
        if "organisation" in form.errors:
            raise Http404("No such organisation of yours.")
        return _page(request, membership, form, status=400)
    data = form.cleaned_data
    organisation = _chosen_organisation(request, data["organisation"])
    try:
        added = member_create(
            organisation=organisation,
            username=data["username"],
            password=data["password"],
            role=data["role"],
            added_by=request.user,
        )
    except Forbidden as exc:
        return forbidden(request, exc)
    except ServiceError as exc:
        # On the field it refused (`member_create` names it), else above the form.
        form.add_error(exc.extra.get("field"), exc.message)
        return _page(request, membership, form, status=exc.status_code)
    messages.success(
        request,
        f"{added.user.get_username()} can now sign in as a {added.get_role_display().lower()} "
        f"of {organisation.name}: give them their username and password.",
    )
    return redirect("web:members")
