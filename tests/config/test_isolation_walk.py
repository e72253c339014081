"""One organisation never reaches another's records, by any route: every URL pattern (the
resolver, walked recursively) and every API operation (the OpenAPI schema) is tried with
the second organisation's ids as a member of the first, and without credentials.

Nothing here lists the routes: a route added tomorrow is walked tomorrow, and one whose
path parameter the walk cannot fill, or that answers anything but 404 with another
organisation's id, fails. Routes that answer everyone are named below, with the reason.
Each walk counts what it tried of each kind against a floor (WALKED_AT_LEAST), so a walk
that finds no routes fails instead of passing with nothing checked.
"""

import json

import pytest
from django.test import Client

from documents.services.organisations import member_add
from tests.support.routes import Param, Route, api_operations, generic_value, url_routes
from tests.support.world import World, world

pytestmark = pytest.mark.django_db

# Routes anyone may call, and why.
PUBLIC = {
    "login": "the sign-in page",
    "logout": "signing out: without a session there is nobody to sign out",
    "admin:login": "the admin's sign-in page",
    "admin:logout": "signing out of the admin",
    "connections:onedrive_notifications": (
        "Microsoft Graph's change notifications: each is trusted only by its clientState"
    ),
    "api:openapi-json": "the API's description",
    "api:openapi-view": "the API's interactive docs",
    "api:api-root": "a 404 that names the docs",
    "api_not_found": "the API's JSON 404 for an address it does not have",
}
# The member pages' JSON endpoints, called by their script: without a session they answer
# 401 in JSON (a redirect to sign in would be followed, and read as a 200).
MEMBER_JSON = {
    "web:upload",
    "web:direct_upload",
    "web:direct_upload_complete",
    "web:documents_live",
    "web:document_live",
}
# Staff only, whatever the organisation: the operator's side (admin, dashboard, /metrics).
OPERATOR_PREFIXES = ("/admin/", "/metrics")
METHODS = ("get", "post")
# How many of each kind the walks below try today, as a floor: a walk that finds none (a
# resolver change, a schema path change) fails instead of passing with nothing checked. A
# route added raises a count; a route removed is a decision to lower its floor here.
WALKED_AT_LEAST = {
    "member pages": 27,  # URL patterns, but the public, operator and API ones
    "operator pages": 138,  # URL patterns under OPERATOR_PREFIXES
    "API URL patterns": 14,
    "API operations": 14,
}


@pytest.fixture
def two_worlds(org, other_org, settings):
    # OneDrive configured, so that its pages answer as they do in production.
    settings.PAPERLANE_ONEDRIVE_CLIENT_ID = "walk-client-id"
    settings.PAPERLANE_ONEDRIVE_CLIENT_SECRET = "walk-secret"
    return world(org), world(other_org)


@pytest.fixture
def alice(org) -> Client:
    member_add(organisation=org, username="alice", password="correct horse battery")
    client = Client()
    assert client.login(username="alice", password="correct horse battery")
    return client


def _theirs(theirs: World, route: Route):
    values = theirs.values()

    def value(param: Param) -> str:
        assert param.name in values, (
            f"{route.full_name} ({route.pattern}) takes '{param.name}': give "
            "tests/support/world.py an object of the other organisation for it"
        )
        return values[param.name]

    return value


def _answers(client: Client, url: str) -> dict[str, int]:
    return {method: getattr(client, method)(url).status_code for method in METHODS}


def _is_operator_route(url: str) -> bool:
    return url.startswith(OPERATOR_PREFIXES)


def _refused_to_non_operators(response) -> bool:
    """The admin's sign-in, or a refusal (django-rq's JSON asks for its own token: 401)."""
    if response.status_code == 302:
        return response["Location"].startswith("/admin/login/")
    return response.status_code in (401, 403, 404, 405)


def assert_walked(walked: dict[str, int]) -> None:
    """Each kind of route was walked, and no fewer than WALKED_AT_LEAST says."""
    for kind, count in walked.items():
        assert count > 0, f"the walk found no {kind}: tests/support/routes.py sees none"
        assert count >= WALKED_AT_LEAST[kind], (
            f"walked {count} {kind}, fewer than the {WALKED_AT_LEAST[kind]} in WALKED_AT_LEAST"
        )


def _leaks(response, theirs: World) -> list[str]:
    body = response.content.decode(errors="replace")
    return [secret for secret in theirs.secrets if secret in body]


def test_every_page_refuses_another_organisations_ids(two_worlds, alice):
    mine, theirs = two_worlds
    walked = 0
    for route in url_routes():
        if route.full_name in PUBLIC or route.namespace == "api":
            continue
        if _is_operator_route("/" + route.pattern):
            continue
        url = route.fill(_theirs(theirs, route))
        if route.params:
            answers = _answers(alice, url)
            assert set(answers.values()) <= {404, 405} and 404 in answers.values(), (
                f"{route.full_name}: {url} answered {answers} with another organisation's ids"
            )
        else:
            for method in METHODS:
                response = getattr(alice, method)(url)
                assert response.status_code < 500, (route.full_name, method, response.status_code)
                assert not _leaks(response, theirs), (
                    route.full_name,
                    method,
                    _leaks(response, theirs),
                )
        walked += 1
    assert_walked({"member pages": walked})


# The member pages that name a document, run, upload or token in their path: each is
# walked above with the other organisation's (a page renamed or dropped must say so here).
MEMBER_ROUTES_WITH_IDS = {
    "web:document_detail",
    "web:document_live",
    "web:document_file",
    "web:document_delete",
    "web:run_retry",
    "web:run_cancel",
    "web:direct_upload_complete",
    "web:token_revoke",
    "web:webhook_detail",
    "web:webhook_delete",
    "web:webhook_action",
    "web:webhook_send_again",
}


def test_the_member_pages_that_take_ids_are_all_walked():
    walked = {route.full_name for route in url_routes() if route.params}

    assert MEMBER_ROUTES_WITH_IDS <= walked, MEMBER_ROUTES_WITH_IDS - walked


def test_ids_in_the_query_find_nothing_of_another_organisation(two_worlds, alice):
    """The live answer of the documents list takes its ids in the query, where the walk
    above does not look: another organisation's document is left out, as if unknown."""
    mine, theirs = two_worlds
    ours, other = mine.values()["document_id"], theirs.values()["document_id"]

    response = alice.get(f"/documents/live/?id={other}&id={ours}")

    assert response.status_code == 200
    assert [row["id"] for row in response.json()["documents"]] == [ours]
    assert not _leaks(response, theirs)


def test_every_api_operation_refuses_another_organisations_ids(two_worlds):
    mine, theirs = two_worlds
    values = theirs.values()
    operations = api_operations()
    assert_walked({"API operations": len(operations)})
    for operation in operations:
        for name in operation.path_params:
            assert name in values, (
                f"{operation.method} {operation.path} takes '{name}': give "
                "tests/support/world.py an object of the other organisation for it"
            )
        url = operation.url(values)
        response = mine.api.generic(operation.method, url)
        if operation.path_params:
            assert response.status_code == 404, (operation.method, url, response.status_code)
            assert response.json()["code"] == "not_found"
        else:
            assert response.status_code < 500, (operation.method, url, response.status_code)
        assert not _leaks(response, theirs), (operation.method, url, _leaks(response, theirs))


def test_every_api_route_is_an_operation_of_the_schema_or_public():
    operations = {(op.path, op.operation_id) for op in api_operations()}
    paths = {path for path, _ in operations}
    walked = 0
    for route in url_routes():
        if route.namespace != "api" or route.full_name in PUBLIC:
            continue
        template = "/" + "".join(
            text if kind == "text" else "{" + text + "}" for kind, text in route.pieces
        )
        assert template in paths, f"{route.full_name} ({template}) is not in the OpenAPI schema"
        walked += 1
    assert_walked({"API URL patterns": walked, "API operations": len(operations)})


def test_without_credentials_the_api_is_401_and_pages_send_to_sign_in(two_worlds):
    _, theirs = two_worlds
    anonymous = Client()
    walked = {"API operations": 0, "operator pages": 0, "member pages": 0}
    for operation in api_operations():
        url = operation.url(theirs.values())
        response = anonymous.generic(operation.method, url)
        assert response.status_code == 401, (operation.method, url, response.status_code)
        assert response.json()["code"] == "unauthorized"
        walked["API operations"] += 1
    for route in url_routes():
        if route.full_name in PUBLIC or route.namespace == "api":
            continue
        url = route.fill(lambda param: theirs.values().get(param.name) or generic_value(param))
        answers = {method: getattr(anonymous, method)(url) for method in METHODS}
        codes = {method: response.status_code for method, response in answers.items()}
        if _is_operator_route(url):
            for response in answers.values():
                assert _refused_to_non_operators(response), (route.full_name, url, codes)
            walked["operator pages"] += 1
            continue
        walked["member pages"] += 1
        if route.full_name in MEMBER_JSON:
            refused = [r for r in answers.values() if r.status_code == 401]
            assert refused and all(r.status_code in (401, 405) for r in answers.values()), (
                f"{route.full_name}: {url} answered {codes} without credentials"
            )
            assert all(r.json()["code"] == "unauthorized" for r in refused), route.full_name
            continue
        sign_in = "/accounts/login/"
        redirected = [
            r
            for r in answers.values()
            if r.status_code == 302 and r["Location"].startswith(sign_in)
        ]
        assert redirected and all(r.status_code in (302, 405) for r in answers.values()), (
            f"{route.full_name}: {url} answered {codes} without credentials"
        )
    assert_walked(walked)


def test_a_member_gets_nothing_of_the_operators_side(two_worlds, alice):
    _, theirs = two_worlds
    walked = 0
    for route in url_routes():
        if route.full_name in PUBLIC:
            continue
        url = route.fill(lambda param: theirs.values().get(param.name) or generic_value(param))
        if not _is_operator_route(url):
            continue
        for method in METHODS:
            response = getattr(alice, method)(url)
            assert _refused_to_non_operators(response), (route.full_name, method, url)
            assert not _leaks(response, theirs)
        walked += 1
    assert_walked({"operator pages": walked})


def test_the_walk_finds_a_leak():
    """The walk's own check: a body naming the other organisation's document is a leak."""
    fake = World(
        organisation=None,
        api=None,
        spare_token=None,
        run=None,
        connector_import=None,
        upload=None,
        endpoint=None,
        delivery=None,
        secrets=("globex-confidential-minutes.pdf",),
    )

    class Response:
        content = json.dumps({"items": [{"filename": "globex-confidential-minutes.pdf"}]}).encode()

    assert _leaks(Response, fake) == ["globex-confidential-minutes.pdf"]
