"""Django's error pages, except under /api/: there every error is JSON `{detail, code}`,
also when it happens outside the NinjaAPI (a middleware, an unknown address)."""

from django.http import HttpRequest, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt

from core.http import is_api_request


def bad_request(request: HttpRequest, exception=None):
    if is_api_request(request):
        return JsonResponse(
            {"detail": "The request could not be understood.", "code": "bad_request"},
            status=400,
        )
    return defaults.bad_request(request, exception)


def page_not_found(request: HttpRequest, exception=None):
    if is_api_request(request):
        return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)
    return defaults.page_not_found(request, exception)


@csrf_exempt
def api_not_found(request: HttpRequest, *args, **kwargs):
    """Every address under /api/ that no API operation has: the API's JSON 404 for any
    method, also with DEBUG on, where Django would otherwise answer with its HTML debug
    page (handler404 is only used with DEBUG off)."""
    return page_not_found(request)


def server_error(request: HttpRequest):
    if is_api_request(request):
        return JsonResponse(
            {
                "detail": "Something went wrong on our side; it has been logged.",
                "code": "internal_error",
            },
            status=500,
        )
    return defaults.server_error(request)


class JsonMethodNotAllowedMiddleware:
    """ninja answers a method an API address does not have with a plain-text 405; under
    /api/ it is JSON, as every error there is, with the `Allow` header kept."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        response = self.get_response(request)
        if response.status_code != 405 or not is_api_request(request):
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        allowed = response.get("Allow", "")
        answer = JsonResponse(
            {
                "detail": f"This address does not take {request.method}; it takes {allowed}.",
                "code": "method_not_allowed",
            },
            status=405,
        )
        answer["Allow"] = allowed
        return answer
