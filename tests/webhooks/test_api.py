"""The webhook endpoints' API, as an integration with an admin's token uses it."""

import pytest
from django.test import Client
from django.utils import timezone
from standardwebhooks import Webhook

from core.secrets import credentials_decrypt
from documents.services.tokens import api_token_create
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run
from webhooks.delivery import secrets_in_force
from webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from webhooks.signing import signed_headers

pytestmark = pytest.mark.django_db

NEW = {"url": "https://hooks.example.com/paperlane", "events": ["run.succeeded"]}


def _create(api, **changes):
    return api.post("/api/v1/webhooks", {**NEW, **changes}, content_type="application/json")


def test_an_endpoint_is_made_with_a_secret_shown_once(api):
    response = _create(api, description="billing")

    assert response.status_code == 201
    body = response.json()
    assert body["secret"].startswith("whsec_")
    assert (body["url"], body["events"], body["enabled"]) == (NEW["url"], NEW["events"], True)
    stored = WebhookEndpoint.objects.get(id=body["id"])
    assert body["secret"] not in stored.secret  # encrypted at rest
    assert credentials_decrypt(stored.secret)["secret"] == body["secret"]
    shown = api.get(f"/api/v1/webhooks/{body['id']}").json()
    assert "secret" not in shown and shown["description"] == "billing"
    assert api.get("/api/v1/webhooks").json()["count"] == 1


@pytest.mark.parametrize(
    ("changes", "status"),
    [
        ({"url": "http://hooks.example.com/in"}, 422),  # plain HTTP: no network allowed
        ({"url": "https://user:pw@hooks.example.com/in"}, 422),
        ({"url": "ftp://hooks.example.com"}, 422),
        ({"events": []}, 422),
        ({"events": ["run.exploded"]}, 422),
        ({"events": ["webhook.test"]}, 422),  # sent on request only
        ({"colour": "blue"}, 422),
    ],
)
def test_what_cannot_be_an_endpoint_is_refused_and_nothing_is_made(api, changes, status):
    assert _create(api, **changes).status_code == status
    assert not WebhookEndpoint.objects.exists()


def test_an_organisation_has_at_most_ten_endpoints(api):
    for n in range(10):
        assert _create(api, url=f"https://hooks.example.com/{n}").status_code == 201
    refused = _create(api)
    assert refused.status_code == 409
    assert refused.json()["code"] == "webhook_endpoint_limit_reached"


def test_only_an_admins_token_manages_endpoints(org, api):
    endpoint_id = _create(api).json()["id"]
    _, raw = api_token_create(organisation=org, name="m", role="member")
    member = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert member.get("/api/v1/webhooks").status_code == 403
    assert _create(member).status_code == 403
    assert member.delete(f"/api/v1/webhooks/{endpoint_id}").status_code == 403
    assert WebhookEndpoint.objects.filter(id=endpoint_id).exists()


def test_another_organisations_endpoint_is_not_found(api, other_api):
    theirs = _create(other_api).json()["id"]

    assert api.get(f"/api/v1/webhooks/{theirs}").status_code == 404
    assert api.delete(f"/api/v1/webhooks/{theirs}").status_code == 404
    assert api.post(f"/api/v1/webhooks/{theirs}/test").status_code == 404
    assert api.get("/api/v1/webhooks").json()["count"] == 0


def test_disabling_leaves_pending_deliveries_unsent_and_enabling_forgets_failures(api):
    endpoint_id = _create(api).json()["id"]
    assert api.post(f"/api/v1/webhooks/{endpoint_id}/test").status_code == 202

    changed = api.patch(
        f"/api/v1/webhooks/{endpoint_id}", {"enabled": False}, content_type="application/json"
    )
    assert changed.status_code == 200 and changed.json()["enabled"] is False
    assert "Disabled by api-token:" in changed.json()["disabled_reason"]
    assert WebhookDelivery.objects.get().status == "skipped"
    assert api.post(f"/api/v1/webhooks/{endpoint_id}/test").status_code == 409

    again = api.patch(
        f"/api/v1/webhooks/{endpoint_id}", {"enabled": True}, content_type="application/json"
    )
    assert again.json()["enabled"] is True and again.json()["disabled_reason"] == ""


def test_a_rotated_secret_signs_beside_the_old_one_for_a_day(api):
    created = _create(api).json()
    rotated = api.post(f"/api/v1/webhooks/{created['id']}/rotate-secret").json()
    assert rotated["secret"] != created["secret"] and rotated["previous_secret_until"]

    endpoint = WebhookEndpoint.objects.get(id=created["id"])
    secrets = secrets_in_force(endpoint)
    assert secrets == [rotated["secret"], created["secret"]]
    headers = signed_headers(
        event_id="evt_1", at=timezone.now(), body=b"{}", secrets_in_force=secrets
    )
    for secret in (created["secret"], rotated["secret"]):
        Webhook(secret).verify(b"{}", headers)  # a receiver on either secret verifies


def test_a_test_event_and_its_delivery_are_listed(api):
    endpoint_id = _create(api).json()["id"]
    queued = api.post(f"/api/v1/webhooks/{endpoint_id}/test")
    assert queued.status_code == 202
    assert queued.json()["event_type"] == "webhook.test"

    page = api.get(f"/api/v1/webhooks/{endpoint_id}/deliveries").json()
    assert page["count"] == 1
    [delivery] = page["items"]
    assert delivery["event_id"].startswith("evt_") and delivery["status"] == "pending"
    again = api.post(f"/api/v1/webhooks/{endpoint_id}/deliveries/{delivery['id']}/send-again")
    assert again.status_code == 202


def test_a_change_no_endpoint_wants_writes_nothing(api):
    _create(api, events=["document.deleted"])
    accepted_run(api, make_pdf(1))

    from pipeline.models import ImportRun
    from pipeline.services.people import run_cancel  # noqa: F401  (a run.cancelled below)

    run = ImportRun.objects.get()
    assert api.post(f"/api/v1/runs/{run.id}/cancel").status_code == 200
    assert not WebhookEvent.objects.exists()
    assert api.delete(f"/api/v1/documents/{run.document_id}").status_code == 204
    assert list(WebhookEvent.objects.values_list("type", flat=True)) == ["document.deleted"]
