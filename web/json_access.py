"""Who may call the JSON endpoints the member pages' script calls (uploads, live answers),
and how a refusal reads there: JSON with a status the script can act on, never the
sign-in page, which the browser's fetch would follow to a 200."""

from collections.abc import Callable
from functools import wraps

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse

from web.organisation_views import current_membership

SIGNED_OUT = "You were signed out; sign in again."


def json_refusal(detail: str, *, code: str, status: int) -> JsonResponse:
    """A refusal as the API words one: `detail` for a person, `code` for the script."""
    return JsonResponse({"detail": detail, "code": code}, status=status)


def json_member_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The view, for a signed-in member of an organisation; 401 JSON for a session that
    ended, 403 JSON for a user who is no member of any organisation (any more)."""

    @wraps(view)
    def guarded(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.is_authenticated:
            return json_refusal(SIGNED_OUT, code="unauthorized", status=401)
        try:
            current_membership(request)
        except PermissionDenied as exc:
            return json_refusal(str(exc), code="forbidden", status=403)
        return view(request, *args, **kwargs)

    return guarded
