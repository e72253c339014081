"""The members' webhooks pages: an admin adds an endpoint (its secret shown once), sees its
deliveries with their last answer, sends a test event, sends one again, rotates the
secret, disables, enables and deletes it; anyone else is neither offered nor allowed."""

import re

import pytest
from standardwebhooks import Webhook

from core.secrets import credentials_decrypt
from tests.support.members import signed_in
from webhooks.models import DeliveryAttempt, WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db

NEW = {"url": "https://hooks.example.com/in", "events": ["run.succeeded", "run.failed"]}


def _secret(page: str) -> str:
    return re.search(r'id="webhook-secret" value="(whsec_[^"]+)"', page)[1]


def test_an_admin_adds_an_endpoint_whose_secret_is_shown_once(org):
    admin = signed_in(org, "ada", "admin")

    made = admin.post("/webhooks/", {**NEW, "description": "billing"})
    endpoint = WebhookEndpoint.objects.get()
    assert made.status_code == 302 and made["Location"] == f"/webhooks/{endpoint.id}/"
    shown = admin.get(made["Location"])
    assert shown["Cache-Control"] == "no-store"
    secret = _secret(shown.content.decode())
    assert credentials_decrypt(endpoint.secret)["secret"] == secret
    assert "webhook-secret" not in admin.get(made["Location"]).content.decode()
    listing = admin.get("/webhooks/").content.decode()
    assert "https://hooks.example.com/in" in listing and "billing" in listing


def test_a_plain_http_url_is_refused_with_the_reason(org):
    admin = signed_in(org, "ada", "admin")
    refused = admin.post("/webhooks/", {**NEW, "url": "http://hooks.example.com/in"})
    assert refused.status_code == 400
    assert "HTTPS only" in refused.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_the_endpoint_page_shows_each_delivery_with_its_last_answer_and_sends_again(org):
    admin = signed_in(org, "ada", "admin")
    admin.post("/webhooks/", NEW)
    endpoint = WebhookEndpoint.objects.get()

    assert admin.post(f"/webhooks/{endpoint.id}/test/").status_code == 302
    delivery = WebhookDelivery.objects.get()
    DeliveryAttempt.objects.create(
        delivery=delivery,
        number=1,
        outcome="failed",
        status_code=503,
        error="answered 503",
        response_excerpt="busy, come back later",
        started_at=delivery.created_at,
        finished_at=delivery.created_at,
    )
    WebhookDelivery.objects.filter(id=delivery.id).update(status="dead_letter", attempts=1)
    page = admin.get(f"/webhooks/{endpoint.id}/").content.decode()
    assert "webhook.test" in page and "503" in page and "busy, come back later" in page

    assert (
        admin.post(f"/webhooks/{endpoint.id}/deliveries/{delivery.id}/send-again/").status_code
        == 302
    )
    delivery.refresh_from_db()
    assert delivery.status == "pending"


def test_rotating_shows_the_new_secret_once_and_the_old_one_still_verifies(org):
    admin = signed_in(org, "ada", "admin")
    made = admin.post("/webhooks/", NEW)
    first = _secret(admin.get(made["Location"]).content.decode())
    endpoint = WebhookEndpoint.objects.get()

    rotated = admin.post(f"/webhooks/{endpoint.id}/rotate/")
    second = _secret(admin.get(rotated["Location"]).content.decode())
    assert second != first
    endpoint.refresh_from_db()
    assert credentials_decrypt(endpoint.previous_secret)["secret"] == first
    Webhook(second)  # a secret the package takes


def test_disable_enable_and_delete(org):
    admin = signed_in(org, "ada", "admin")
    admin.post("/webhooks/", NEW)
    endpoint = WebhookEndpoint.objects.get()

    admin.post(f"/webhooks/{endpoint.id}/disable/")
    endpoint.refresh_from_db()
    assert not endpoint.enabled and "Disabled by user:ada" in endpoint.disabled_reason
    assert "Disabled" in admin.get(f"/webhooks/{endpoint.id}/").content.decode()
    admin.post(f"/webhooks/{endpoint.id}/enable/")
    endpoint.refresh_from_db()
    assert endpoint.enabled

    assert admin.get(f"/webhooks/{endpoint.id}/delete/").status_code == 200
    assert admin.post(f"/webhooks/{endpoint.id}/delete/").status_code == 302
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("role", ["viewer", "member"])
def test_only_admins_are_offered_or_allowed_webhooks(org, role):
    admin = signed_in(org, "ada", "admin")
    admin.post("/webhooks/", NEW)
    endpoint = WebhookEndpoint.objects.get()
    other = signed_in(org, "bob", role)

    assert 'href="/webhooks/"' not in other.get("/").content.decode()
    assert other.get("/webhooks/").status_code == 403
    assert other.post("/webhooks/", NEW).status_code == 403
    assert other.get(f"/webhooks/{endpoint.id}/").status_code == 403
    assert other.post(f"/webhooks/{endpoint.id}/disable/").status_code == 403
    assert other.post(f"/webhooks/{endpoint.id}/delete/").status_code == 403
    endpoint.refresh_from_db()
    assert endpoint.enabled and WebhookEndpoint.objects.count() == 1
