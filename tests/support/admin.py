"""Drive the operator's admin as a staff member, and make many runs quickly for it."""

import hashlib
import re
import uuid

from django.test import Client
from django.utils import timezone

from documents.models import Document, Organisation, QuotaReservation
from documents.services.organisations import member_add
from jobs.models import ImportRun, RunSource, RunStatus, StageAttempt

RUNS = "/admin/jobs/importrun/"
RUN_LINK = re.compile(r'href="/admin/jobs/importrun/([0-9a-f-]{36})/change/')


def operator_client(organisation: Organisation, username: str = "olga") -> Client:
    """A staff member of the Operators group, logged in."""
    member_add(organisation=organisation, username=username, password="operator-pass-1", staff=True)
    client = Client()
    assert client.login(username=username, password="operator-pass-1")
    return client


def listed(client: Client, query: str = "") -> set[str]:
    """The ids of the runs the runs list shows for `query` (e.g. "status__exact=failed")."""
    response = client.get(f"{RUNS}?{query}")
    assert response.status_code == 200, response.content[:500]
    return set(RUN_LINK.findall(response.content.decode()))


def act(client: Client, action: str, runs, reason: str = "operator test"):
    """Confirm `action` on `runs` with a reason, as the confirmation page posts it."""
    ids = " ".join(str(r.id) for r in runs)
    return client.post(f"{RUNS}act/{action}/", {"runs": ids, "reason": reason})


def make_runs(
    organisation: Organisation,
    count: int,
    *,
    attempts: int = 0,
    held: bool = False,
    name: str = "bulk",
    **fields,
) -> list[ImportRun]:
    """`count` runs with their documents and reservations (1 page each), written in bulk.

    Reservations are released unless `held`; a held page is added to the organisation's
    total, so its page counts stay what the quota services would have made them.
    """
    now = timezone.now()
    documents = [
        Document(
            id=uuid.uuid4(),
            organisation=organisation,
            filename=f"{name}-{n}.pdf",
            kind="pdf",
            size_bytes=100,
            sha256=hashlib.sha256(f"{name}{n}".encode()).hexdigest(),
            storage_key=f"test/{uuid.uuid4()}",
        )
        for n in range(count)
    ]
    Document.objects.bulk_create(documents)
    status = QuotaReservation.Status.HELD if held else QuotaReservation.Status.RELEASED
    reservations = QuotaReservation.objects.bulk_create(
        QuotaReservation(organisation=organisation, pages=1, status=status) for _ in documents
    )
    if held:
        Organisation.objects.filter(id=organisation.id).update(pages_reserved=count)
    defaults = {"source": RunSource.API, "status": RunStatus.SUCCEEDED, "stage": "settle"}
    runs = ImportRun.objects.bulk_create(
        ImportRun(
            organisation=organisation,
            document=document,
            reservation=reservation,
            **{**defaults, **fields},
        )
        for document, reservation in zip(documents, reservations, strict=True)
    )
    StageAttempt.objects.bulk_create(
        StageAttempt(
            run=run,
            stage="create",
            number=number,
            started_at=now,
            finished_at=now,
            outcome="transient_error",
            error_type="jobs.errors.TransientError",
            error_message="TransientError: provider answered 503",
            traceback="Traceback (most recent call last):\n  ...",
        )
        for run in runs
        for number in range(1, attempts + 1)
    )
    return runs
