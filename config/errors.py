"""Django's error pages, except under /api/: there every error is JSON `{detail, code}`,
also when it happens outside the NinjaAPI (a middleware, an unknown address)."""

from django.http import HttpRequest, JsonResponse
from django.views import defaults

API_PREFIX = "/api/"


def _api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def bad_request(request: HttpRequest, exception=None):
    if _api(request):
        return JsonResponse(
            {"detail": "The request could not be understood.", "code": "bad_request"},
            status=400,
        )
    return defaults.bad_request(request, exception)


def page_not_found(request: HttpRequest, exception=None):
    if _api(request):
        return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest):
    if _api(request):
        return JsonResponse(
            {
                "detail": "Something went wrong on our side; it has been logged.",
                "code": "internal_error",
            },
            status=500,
        )
    return defaults.server_error(request)
