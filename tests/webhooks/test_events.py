"""Which changes write an event, in their own transaction, for the endpoints that want it
(the outbox); the workers that deliver them: test_delivery_workers.py."""

import pytest

from connectors.services import connection_pause
from pipeline.models import ImportRun
from pipeline.services.people import run_cancel, run_dead_letter
from pipeline.services.transitions import Actor
from tests.support.admin import make_connections
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run
from webhooks.models import SUBSCRIBABLE, WebhookDelivery, WebhookEvent
from webhooks.services import endpoint_create

pytestmark = pytest.mark.django_db

OPERATOR = Actor("operator", operator=True)


@pytest.fixture
def every_event(org):
    endpoint, _ = endpoint_create(
        organisation=org,
        url="https://hooks.example.com/in",
        events=list(SUBSCRIBABLE),
        actor=OPERATOR,
    )
    return endpoint


def _events(type_):
    return list(WebhookEvent.objects.filter(type=type_))


def test_a_cancelled_and_a_dead_lettered_run_each_write_one_event(api, every_event):
    cancelled = accepted_run(api, make_pdf(1), name="a.pdf")
    stopped = accepted_run(api, make_pdf(1), name="b.pdf")

    run_cancel(run=ImportRun.objects.get(id=cancelled.id), actor=OPERATOR, reason="test")
    run_dead_letter(run=ImportRun.objects.get(id=stopped.id), actor=OPERATOR, reason="look at it")

    [told_cancel] = _events("run.cancelled")
    [told_dead] = _events("run.dead_letter")
    assert told_cancel.data["run_id"] == str(cancelled.id)
    assert told_dead.data["run_id"] == str(stopped.id)
    assert told_dead.data["status"] == "dead_letter"
    assert WebhookDelivery.objects.filter(endpoint=every_event, status="pending").count() == 2
    # Cancelling again changes nothing, and tells nothing.
    run_cancel(run=ImportRun.objects.get(id=cancelled.id), actor=OPERATOR, reason="again")
    assert len(_events("run.cancelled")) == 1


def test_a_paused_connection_writes_one_event_with_why(org, every_event):
    [connection] = make_connections(org, 1)

    connection_pause(connection=connection, actor=OPERATOR, reason="paused for the audit")
    connection_pause(connection=connection, actor=OPERATOR, reason="paused again")

    [told] = _events("connection.paused")
    assert told.data["connection_id"] == connection.id
    assert (told.data["reason"], told.data["by"]) == ("paused for the audit", "operator")
    assert told.data["folder"] == connection.folder_path


def test_another_organisations_endpoint_is_told_nothing(api, other_org):
    endpoint_create(
        organisation=other_org,
        url="https://hooks.example.com/theirs",
        events=list(SUBSCRIBABLE),
        actor=OPERATOR,
    )
    run = accepted_run(api, make_pdf(1))
    run_cancel(run=ImportRun.objects.get(id=run.id), actor=OPERATOR, reason="test")

    assert not WebhookEvent.objects.exists()
