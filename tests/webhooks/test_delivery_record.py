"""How a try's answer changes a delivery and its endpoint, on the real database."""

from datetime import timedelta

import pytest
from django.utils import timezone

from pipeline.services.transitions import Actor
from webhooks.delivery import delivery_record, retry_delay
from webhooks.models import DeliveryAttempt
from webhooks.sending import Answer
from webhooks.services import endpoint_create, endpoint_test_send

pytestmark = pytest.mark.django_db

OPERATOR = Actor("operator", operator=True)


def _tried(org, answer, *, tries=1, failing_since=None):
    endpoint, _ = endpoint_create(
        organisation=org, url="https://hooks.example.com/in", events=["run.failed"], actor=OPERATOR
    )
    endpoint.failing_since = failing_since
    endpoint.save()
    delivery = endpoint_test_send(endpoint=endpoint, actor=OPERATOR)
    delivery.attempts = tries
    delivery.save()
    attempt = DeliveryAttempt.objects.create(
        delivery=delivery, number=tries, started_at=timezone.now()
    )
    delivery_record(delivery=delivery, attempt=attempt, answer=answer, endpoint=endpoint)
    delivery.refresh_from_db()
    endpoint.refresh_from_db()
    attempt.refresh_from_db()
    return endpoint, delivery, attempt


def test_the_schedule_retries_within_20_s_first_and_about_a_day_after_the_first_try():
    firsts = [retry_delay(tries=1) for _ in range(200)]
    assert 10 <= min(firsts) and max(firsts) <= 20
    longest = sum(float(step) for step in (20, 120, 600, 3600, 10800, 21600, 43200))
    assert 22 * 3600 < longest < 24 * 3600
    assert retry_delay(tries=7) is not None and retry_delay(tries=8) is None


def test_a_failed_try_is_due_again_later_and_the_endpoint_counts_its_failure(org):
    before = timezone.now()
    endpoint, delivery, attempt = _tried(org, Answer(status_code=500, excerpt="oops"))

    assert (delivery.status, delivery.last_status_code) == ("pending", 500)
    assert before + timedelta(seconds=10) <= delivery.next_attempt_at
    assert (attempt.outcome, attempt.error, attempt.response_excerpt) == (
        "failed",
        "answered 500",
        "oops",
    )
    assert endpoint.failing_since is not None and endpoint.enabled


def test_the_last_try_failing_dead_letters_the_delivery(org):
    _, delivery, _ = _tried(org, Answer(error="no answer within 10 s"), tries=8)

    assert (delivery.status, delivery.next_attempt_at) == ("dead_letter", None)
    assert delivery.last_error == "no answer within 10 s"


def test_a_redirect_is_a_failure_that_says_so(org):
    _, _, attempt = _tried(org, Answer(status_code=302))
    assert attempt.error == "answered 302: redirects are not followed"


def test_a_day_of_failures_disables_the_endpoint_and_its_pending_deliveries_go_unsent(org):
    a_day_ago = timezone.now() - timedelta(days=1, minutes=1)
    endpoint, delivery, _ = _tried(org, Answer(status_code=503), failing_since=a_day_ago)

    assert not endpoint.enabled
    assert endpoint.disabled_reason.startswith("Every try has failed since")
    assert delivery.status == "skipped"


def test_a_success_forgets_the_failures(org):
    endpoint, delivery, _ = _tried(
        org, Answer(status_code=204), failing_since=timezone.now() - timedelta(hours=3)
    )
    assert (delivery.status, delivery.attempts) == ("succeeded", 1)
    assert endpoint.failing_since is None
