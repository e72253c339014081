"""What every member page's header shows: the organisation one works in (and the switcher
for a member of several), one's role in it, and what that role may do."""

from functools import cached_property

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from documents.models import Membership
from documents.roles import abilities
from pipeline.stages.ocr import ocr_languages, ocr_unavailable
from web.organisation_views import current_membership, memberships_of


class Member:
    """Read only when a page shows it: the admin's pages never do."""

    def __init__(self, request: HttpRequest) -> None:
        self._request = request

    @cached_property
    def membership(self) -> Membership | None:
        user = getattr(self._request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        try:
            return current_membership(self._request)
        except PermissionDenied:
            return None

    @cached_property
    def organisation(self):
        return self.membership.organisation if self.membership else None

    @cached_property
    def organisations(self):
        if self.membership is None:
            return []
        return [membership.organisation for membership in memberships_of(self._request)]

    @cached_property
    def role(self) -> str:
        return self.membership.get_role_display() if self.membership else ""

    @cached_property
    def ocr_off(self) -> str | None:
        """Why this server's OCR cannot read the organisation's scans (None when it can):
        pages without text then say so."""
        if self.organisation is None:
            return None
        return ocr_unavailable(ocr_languages(self.organisation))

    @cached_property
    def can(self) -> dict[str, bool]:
        return abilities(self.membership.role if self.membership else None)


def member(request: HttpRequest) -> dict[str, Member]:
    return {"member": Member(request)}
