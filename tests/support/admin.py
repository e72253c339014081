"""Drive the operator's admin as a staff member, and make many runs quickly for it."""

import hashlib
import re
import uuid

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from connectors.models import Connection, ConnectorImport
from documents.models import Chunk, Document, Organisation, QuotaReservation, UsageEntry
from documents.services.organisations import member_add
from pipeline.models import ImportRun, RunSource, RunStatus, StageAttempt

RUNS = "/admin/pipeline/importrun/"
RUN_LINK = re.compile(r'href="/admin/pipeline/importrun/([0-9a-f-]{36})/change/')


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


def page_queries(client: Client, url: str) -> list[str]:
    """The SQL of the queries one view of `url` makes, caches (content types,
    permissions) warmed by a first view."""
    client.get(url)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return [query["sql"] for query in captured]


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
            error_type="pipeline.errors.TransientError",
            error_message="TransientError: provider answered 503",
            traceback="Traceback (most recent call last):\n  ...",
        )
        for run in runs
        for number in range(1, attempts + 1)
    )
    return runs


def make_records(organisation: Organisation, count: int, *, name: str = "record") -> None:
    """`count` runs (see make_runs), each with a charge in the ledger and a chunk."""
    runs = make_runs(organisation, count, name=name)
    UsageEntry.objects.bulk_create(
        UsageEntry(
            organisation=organisation,
            document_id=run.document_id,
            document_version=1,
            pages=1,
            reservation_id=run.reservation_id,
        )
        for run in runs
    )
    Chunk.objects.bulk_create(
        Chunk(
            id=uuid.uuid4(),
            document_id=run.document_id,
            version=1,
            index=0,
            text="some text",
            embedding=b"\0" * 16,
            embedding_model="test",
        )
        for run in runs
    )


def make_connections(
    organisation: Organisation, count: int, *, cursor: str = ""
) -> list[Connection]:
    """`count` local-folder connections of `organisation`, each with one file recorded."""
    first = Connection.objects.count()
    connections = Connection.objects.bulk_create(
        Connection(
            organisation=organisation,
            provider=Connection.Provider.LOCAL,
            folder_id=f"/srv/folder-{first + n}",
            folder_path=f"/srv/folder-{first + n}",
            cursor=cursor,
        )
        for n in range(count)
    )
    ConnectorImport.objects.bulk_create(
        ConnectorImport(
            organisation=organisation,
            connection=each,
            file_id="file-1",
            content_version="1",
            name="scan.pdf",
            path=f"{each.folder_path}/scan.pdf",
        )
        for each in connections
    )
    return connections
