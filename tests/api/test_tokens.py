"""The tokens API: an organisation lists and revokes its own API tokens; only people make
them (the admin, `create_api_token`), never a token."""

import base64
import logging
from datetime import timedelta

import httpx
import pytest
from django.test import Client
from django.utils import timezone

from documents.models import ApiToken
from documents.services.organisations import organisation_create
from documents.services.tokens import api_token_create, api_token_revoke
from tests.support.processes import web_server

pytestmark = pytest.mark.django_db

URL = "/api/v1/tokens"
FIELDS = {
    "id",
    "name",
    "role",
    "prefix",
    "created_at",
    "last_used_at",
    "revoked_at",
    "active",
    "current",
}


def _client(raw: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


@pytest.fixture
def caller(org) -> tuple[ApiToken, Client]:
    """The organisation's token a test's requests are made with, and its client."""
    # Listing and revoking others take an admin's token (tests/api/test_roles.py).
    token, raw = api_token_create(organisation=org, name="caller", role="admin")
    return token, _client(raw)


def test_the_list_is_the_organisations_tokens_newest_first_marking_the_callers(caller, org):
    token, client = caller
    older, _ = api_token_create(organisation=org, name="older")
    revoked, _ = api_token_create(organisation=org, name="revoked")
    api_token_revoke(token=revoked)
    ApiToken.objects.filter(id=older.id).update(created_at=timezone.now() - timedelta(days=3))

    response = client.get(URL)

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3 and (body["limit"], body["offset"]) == (50, 0)
    items = body["items"]
    assert [item["name"] for item in items] == ["revoked", "caller", "older"]
    assert all(set(item) == FIELDS for item in items)
    mine = items[1]
    assert (mine["id"], mine["prefix"], mine["current"], mine["active"]) == (
        token.id,
        token.prefix,
        True,
        True,
    )
    # The request itself was the caller's last use.
    assert mine["last_used_at"] is not None and mine["revoked_at"] is None
    assert items[0]["active"] is False and items[0]["revoked_at"] is not None
    assert [item["current"] for item in items] == [False, True, False]
    assert items[2]["last_used_at"] is None


def test_the_list_never_shows_a_secret_or_a_hash(caller, org):
    _, client = caller
    _, raw = api_token_create(organisation=org, name="other")

    text = client.get(URL).content.decode()

    for stored in ApiToken.objects.all():
        assert stored.token_hash not in text
    assert raw not in text and raw[len("pl_") + 6 :] not in text


def test_the_list_never_shows_another_organisations_tokens(caller, other_org, other_api):
    token, client = caller
    theirs, _ = api_token_create(organisation=other_org, name="theirs")

    mine = client.get(URL).json()
    other = other_api.get(URL).json()

    assert [item["id"] for item in mine["items"]] == [token.id] and mine["count"] == 1
    assert theirs.id in {item["id"] for item in other["items"]}
    assert token.id not in {item["id"] for item in other["items"]}


def test_the_list_is_paged_bounded_and_filtered_by_state(caller, org):
    _, client = caller
    for name in ("a", "b", "c"):
        api_token_create(organisation=org, name=name)
    api_token_revoke(token=ApiToken.objects.get(name="b"))

    page = client.get(f"{URL}?limit=2&offset=1").json()
    out_of_bounds = [client.get(f"{URL}?{query}") for query in ("limit=100000", "offset=-5")]
    beyond = client.get(f"{URL}?offset=1000000000000").json()
    active = client.get(f"{URL}?active=true").json()
    revoked = client.get(f"{URL}?active=false").json()

    assert [item["name"] for item in page["items"]] == ["b", "a"] and page["count"] == 4
    assert [response.status_code for response in out_of_bounds] == [422, 422]
    assert beyond["items"] == [] and beyond["count"] == 4
    assert [item["name"] for item in active["items"]] == ["c", "a", "caller"]
    assert [item["name"] for item in revoked["items"]] == ["b"] and revoked["count"] == 1


def test_a_token_cannot_make_tokens(caller, org):
    _, client = caller

    response = client.post(URL, {"name": "persistent"}, content_type="application/json")

    assert response.status_code == 405
    assert ApiToken.objects.filter(organisation=org).count() == 1


def test_revoking_a_token_is_a_204_it_is_refused_after_and_the_caller_is_kept(caller, org):
    token, client = caller
    other, raw = api_token_create(organisation=org, name="ci")
    assert _client(raw).get("/api/v1/quota").status_code == 200

    response = client.delete(f"{URL}/{other.id}")

    assert response.status_code == 204 and response.content == b""
    assert _client(raw).get("/api/v1/quota").status_code == 401
    other.refresh_from_db()
    assert other.revoked_at is not None
    assert (other.revoked_by_token, other.revoked_by) == (token, None)
    listed = {item["id"]: item for item in client.get(URL).json()["items"]}
    assert listed[other.id]["active"] is False
    assert listed[other.id]["revoked_at"] is not None


def test_revoking_a_revoked_token_again_is_a_204_that_changes_nothing(caller, org):
    token, client = caller
    other, _ = api_token_create(organisation=org, name="ci")
    by_person, _ = api_token_create(organisation=org, name="by person")
    client.delete(f"{URL}/{other.id}")
    api_token_revoke(token=by_person)
    first = ApiToken.objects.values("revoked_at", "revoked_by_token").get(id=other.id)

    again = client.delete(f"{URL}/{other.id}")
    revoked_elsewhere = client.delete(f"{URL}/{by_person.id}")

    assert again.status_code == revoked_elsewhere.status_code == 204
    assert ApiToken.objects.values("revoked_at", "revoked_by_token").get(id=other.id) == first
    # Who revoked it first is kept: not the caller, who only asked again.
    assert ApiToken.objects.get(id=by_person.id).revoked_by_token is None


def test_revoking_the_token_in_use_works_and_its_next_request_is_a_401(caller, org):
    token, client = caller

    response = client.delete(f"{URL}/{token.id}")

    assert response.status_code == 204
    refused = client.get(URL)
    unknown = _client("pl_" + "x" * 43).get(URL)
    assert refused.status_code == 401
    # Exactly what a wrong token gets: a revoked secret tells its holder nothing more.
    assert (
        refused.json()
        == unknown.json()
        == {
            "detail": "Send a valid API token: Authorization: Bearer <token>.",
            "code": "unauthorized",
        }
    )
    assert refused["WWW-Authenticate"] == unknown["WWW-Authenticate"] == "Bearer"
    assert ApiToken.objects.get(id=token.id).revoked_by_token == token


def test_another_organisations_token_or_an_unknown_id_is_a_404_and_stays_active(caller, other_org):
    _, client = caller
    theirs, raw = api_token_create(organisation=other_org, name="theirs")

    for token_id in (theirs.id, theirs.id + 1000):
        response = client.delete(f"{URL}/{token_id}")
        assert response.status_code == 404, token_id
        assert response.json() == {"detail": "API token not found.", "code": "not_found"}

    for token_id in (0, -1, 10**20, "not-a-number"):
        assert client.delete(f"{URL}/{token_id}").status_code == 422, token_id
    assert ApiToken.objects.get(id=theirs.id).revoked_at is None
    assert _client(raw).get("/api/v1/quota").status_code == 200


def test_the_token_routes_need_a_valid_token(org):
    token, _ = api_token_create(organisation=org)
    anonymous = Client()

    responses = [anonymous.get(URL), anonymous.delete(f"{URL}/{token.id}")]

    assert [response.status_code for response in responses] == [401, 401]
    assert ApiToken.objects.count() == 1 and ApiToken.objects.get().revoked_at is None


def test_the_openapi_schema_documents_every_status_of_the_token_routes(client):
    schema = client.get("/api/v1/openapi.json").json()
    paths, components = schema["paths"], schema["components"]["schemas"]

    def answers(path: str, method: str) -> dict:
        return {
            status: response.get("content", {}).get("application/json", {}).get("schema")
            for status, response in paths[path][method]["responses"].items()
        }

    ref = "#/components/schemas/{}".format
    error = {"$ref": ref("ErrorOut")}
    assert answers(URL, "get") == {
        "200": {"$ref": ref("TokenPage")},
        **{status: error for status in ("400", "401", "403", "413", "422", "429", "500")},
    }
    assert "post" not in paths[URL]
    assert answers(f"{URL}/{{token_id}}", "delete") == {
        "204": None,
        **{status: error for status in ("400", "401", "403", "404", "413", "422", "429", "500")},
    }
    assert set(components["TokenOut"]["properties"]) == FIELDS
    assert paths[URL]["get"]["tags"] == ["organisation"]


@pytest.mark.slow  # a web server
@pytest.mark.django_db(transaction=True)
def test_over_http_a_token_is_listed_revoked_and_then_refused():
    org = organisation_create(slug="wire", page_limit=10)
    _, keeper = api_token_create(organisation=org, name="keeper", role="admin")
    made, secret = api_token_create(organisation=org, name="nightly import", role="admin")
    headers = {"Authorization": f"Bearer {secret}"}

    with web_server(workers=1, threads=2) as base, httpx.Client(base_url=base, timeout=10) as http:
        assert http.get("/api/v1/quota", headers=headers).status_code == 200
        listed = http.get("/api/v1/tokens", headers=headers).json()
        current = [item for item in listed["items"] if item["current"]]
        assert [item["id"] for item in current] == [made.id]
        assert current[0]["last_used_at"] is not None
        assert secret not in str(listed)

        revoked = http.delete(f"/api/v1/tokens/{made.id}", headers=headers)
        assert revoked.status_code == 204

        refused = http.get("/api/v1/tokens", headers=headers)
        assert refused.status_code == 401
        assert refused.json()["code"] == "unauthorized"
        assert refused.headers["WWW-Authenticate"] == "Bearer"
        # Another token still works, and sees it revoked.
        still = http.get("/api/v1/tokens", headers={"Authorization": f"Bearer {keeper}"})
        assert still.status_code == 200
        gone = {item["id"]: item for item in still.json()["items"]}[made.id]
        assert gone["active"] is False and gone["revoked_at"] is not None


def test_no_token_reaches_the_logs_whatever_the_scheme_it_is_sent_in(org, settings, caplog):
    settings.DEBUG = True  # django-ninja's bearer class logs a header it cannot read then
    settings.PAPERLANE_METRICS_TOKEN = "metrics-secret-42"
    _, raw = api_token_create(organisation=org, name="logged")
    secret = raw.removeprefix("pl_")
    basic = base64.b64encode(f"user:{raw}".encode()).decode()
    headers = [
        f"Basic {raw}",
        f"Token {raw}",
        raw,
        f"Basic {basic}",
        f"Bearer {raw}x",
        f"bearer  {raw}",
        f"Bearer {raw}",
        "Basic metrics-secret-42",
    ]
    caplog.set_level(logging.DEBUG)

    answers = [
        Client(HTTP_AUTHORIZATION=header).get(path).status_code
        for header in headers
        for path in ("/api/v1/quota", "/metrics")
    ]

    assert answers[-4] == 200  # the one well-formed bearer token is read
    assert caplog.records, "nothing was logged at all: the capture did not work"
    for record in caplog.records:
        logged = record.getMessage() + str(record.exc_info or "") + str(record.args)
        for leak in (secret, basic, "metrics-secret-42"):
            assert leak not in logged, (record.name, logged)
