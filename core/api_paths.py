"""Which requests are the API's: under it every error is JSON, and an upload carries one
file. Judged on the path within the site (`path_info`): a site served under a prefix
(SCRIPT_NAME) has its API at /prefix/api/, which `request.path` starts with."""

from django.http import HttpRequest

API_PREFIX = "/api/"


def is_api_request(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)
