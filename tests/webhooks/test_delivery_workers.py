"""Webhooks delivered by real `run_workers` processes to a real receiver on loopback
(allowed by PAPERLANE_WEBHOOK_ALLOWED_NETWORKS), each checked with the `standardwebhooks`
package, as a receiver would."""

import json
import os
import signal

import jsonschema
import pytest
from standardwebhooks import Webhook

from config.api import api
from pipeline.services.transitions import Actor
from tests.support.files import make_damaged_pdf, make_pdf
from tests.support.pipeline import running_workers, wait_for, wait_terminal
from tests.support.receiver import Hang, receiver
from tests.support.runs import unchecked_run
from tests.support.uploads import accepted_run
from webhooks.models import DeliveryAttempt, DeliveryStatus, WebhookDelivery, WebhookEndpoint
from webhooks.services import endpoint_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

OPERATOR = Actor("operator", operator=True)
EVERY_EVENT = [
    "run.succeeded",
    "run.failed",
    "run.dead_letter",
    "run.cancelled",
    "document.deleted",
]
# The stages' workers and one webhook worker.
WORKERS = "extract=1,ocr=1,embed=1,webhooks=1"
WEBHOOK_ENV = {
    "PAPERLANE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
    "PAPERLANE_WEBHOOK_RETRY_SECONDS": "1,1,1",
    "PAPERLANE_WEBHOOK_TIMEOUT_SECONDS": "3",
}


@pytest.fixture
def allowed_loopback(settings):
    settings.PAPERLANE_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]


def _endpoint(org, url, events=EVERY_EVENT):
    return endpoint_create(organisation=org, url=url, events=events, actor=OPERATOR)


def _verified(secret, received):
    """The body, once its signature checks out as a receiver checks it, and once it is what
    the OpenAPI document's `webhooks` say its type sends."""
    event = Webhook(secret).verify(received.body, received.headers)
    schema = api.get_openapi_schema(path_prefix="/api/v1/")
    body = schema["webhooks"][event["type"]]["post"]["requestBody"]
    ref = body["content"]["application/json"]["schema"]["$ref"]
    jsonschema.Draft202012Validator(
        {"$ref": ref, "components": schema["components"]},
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    ).validate(event)
    return event


def test_each_ended_run_is_told_once_signed(api, org, allowed_loopback):
    with receiver(200) as (url, script):
        endpoint, secret = _endpoint(org, url)
        with running_workers(concurrency=WORKERS, **WEBHOOK_ENV):
            good = accepted_run(api, make_pdf(2), name="good.pdf")
            # Bytes that pass no accept check: the sweeper delivers the run, extract fails it.
            bad = unchecked_run(org, make_damaged_pdf(3), kind="pdf", pages=3)
            runs = wait_terminal([good.id, bad.id], timeout=60)
            wait_for(lambda: len(script.received) >= 2, timeout=30, what="two webhooks")
            # A few sweeper passes more: nothing is sent twice.
            wait_for(lambda: _settled(endpoint), timeout=10, what="deliveries to settle")
    events = {e["data"]["run_id"]: e for e in (_verified(secret, r) for r in script.received)}
    assert len(script.received) == 2
    assert events[str(good.id)]["type"] == "run.succeeded"
    assert events[str(bad.id)]["type"] == "run.failed"
    assert runs[bad.id].status == "failed"
    assert events[str(bad.id)]["data"]["error"]["code"] == runs[bad.id].error_code
    told = events[str(good.id)]
    assert told["data"]["document_id"] == str(good.document_id)
    assert told["data"]["status_url"] == f"/api/v1/runs/{good.id}"
    assert told["organisation"] == "acme"
    assert script.received[0].headers["webhook-id"] == _verified(secret, script.received[0])["id"]
    # Nothing of the document's text travels.
    assert "text" not in json.dumps(told["data"])


def _settled(endpoint):
    return not WebhookDelivery.objects.filter(
        endpoint=endpoint, status=DeliveryStatus.PENDING
    ).exists()


def test_a_receiver_that_fails_twice_gets_the_same_event_three_times_and_no_more(
    api, org, allowed_loopback
):
    with receiver(500, 503, 200) as (url, script):
        endpoint, secret = _endpoint(org, url, ["run.succeeded"])
        with running_workers(concurrency=WORKERS, **WEBHOOK_ENV):
            run = accepted_run(api, make_pdf(1), name="told.pdf")
            wait_terminal([run.id], timeout=60)
            wait_for(lambda: len(script.received) >= 3, timeout=30, what="three tries")
            delivery = WebhookDelivery.objects.get(endpoint=endpoint)
            wait_for(lambda: _settled(endpoint), timeout=10, what="the delivery to settle")
    ids = {r.headers["webhook-id"] for r in script.received}
    assert len(script.received) == 3 and len(ids) == 1
    assert all(_verified(secret, r)["data"]["run_id"] == str(run.id) for r in script.received)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("succeeded", 3, 200)
    outcomes = list(delivery.tries.order_by("number").values_list("outcome", "status_code"))
    assert outcomes == [("failed", 500), ("failed", 503), ("delivered", 200)]


def test_a_worker_killed_mid_delivery_loses_nothing(api, org, allowed_loopback):
    with receiver(Hang(20), 200) as (url, script):
        endpoint, secret = _endpoint(org, url, ["run.succeeded"])
        with running_workers(concurrency=WORKERS, **WEBHOOK_ENV):
            run = accepted_run(api, make_pdf(1), name="killed.pdf")
            wait_terminal([run.id], timeout=60)
            wait_for(lambda: script.received, timeout=30, what="the first try")
            first = DeliveryAttempt.objects.get(delivery__endpoint=endpoint, number=1)
            # host.pid.webhooks
            os.kill(int(first.worker.split(".")[-2]), signal.SIGKILL)
            wait_for(lambda: len(script.received) >= 2, timeout=30, what="the try again")
            wait_for(lambda: _settled(endpoint), timeout=10, what="the delivery to settle")
    assert len({r.headers["webhook-id"] for r in script.received}) == 1
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    assert delivery.status == "succeeded"
    outcomes = list(delivery.tries.order_by("number").values_list("outcome", flat=True))
    assert outcomes == ["interrupted", "delivered"]


def test_a_receiver_answering_410_disables_its_endpoint(api, org, allowed_loopback):
    with receiver(410) as (url, script):
        endpoint, _ = _endpoint(org, url, ["run.succeeded"])
        with running_workers(concurrency=WORKERS, **WEBHOOK_ENV):
            first = accepted_run(api, make_pdf(1), name="first.pdf")
            wait_terminal([first.id], timeout=60)
            wait_for(
                lambda: not WebhookEndpoint.objects.get(id=endpoint.id).enabled,
                timeout=30,
                what="the endpoint to be disabled",
            )
            second = accepted_run(api, make_pdf(1), name="second.pdf")
            wait_terminal([second.id], timeout=60)
    endpoint.refresh_from_db()
    assert "410" in endpoint.disabled_reason
    assert len(script.received) == 1
    assert WebhookDelivery.objects.filter(endpoint=endpoint).count() == 1


def test_a_receiver_that_never_answers_holds_its_worker_no_longer_than_the_limit(
    api, org, allowed_loopback
):
    with receiver(Hang(60)) as (silent_url, _):
        silent, _ = _endpoint(org, silent_url, ["run.succeeded"])
        with running_workers(concurrency=WORKERS, **WEBHOOK_ENV):
            run = accepted_run(api, make_pdf(1), name="to-silence.pdf")
            wait_terminal([run.id], timeout=60)
            wait_for(
                lambda: DeliveryAttempt.objects.filter(
                    delivery__endpoint=silent, outcome="failed"
                ).exists(),
                timeout=30,
                what="the silent receiver's try to end",
            )
    attempt = DeliveryAttempt.objects.get(delivery__endpoint=silent, number=1)
    assert attempt.duration_ms < 3000 + 1500
    assert attempt.error == "no answer within 3 s"
