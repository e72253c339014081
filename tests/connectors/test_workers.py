"""The local-folder connector inside real `run_workers` processes: files dropped into a
folder while it runs flow through the whole pipeline by themselves."""

import hashlib
import threading
import time

import pytest
from django.utils import timezone

from connectors.local import STABLE_SECONDS
from connectors.loop import LOOP_SECONDS
from connectors.models import Connection, ConnectorImport
from connectors.services import connection_create_local
from documents.models import Document, UsageEntry
from pipeline.models import ImportRun
from tests.support.files import make_pdf
from tests.support.folders import fingerprint, write
from tests.support.pipeline import running_workers, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# The folder is polled as often as the connectors loop looks (LOOP_SECONDS, a second).
CONNECTOR_ENV = {"PAPERLANE_CONNECTOR_SYNC_SECONDS": "local=0.3"}
# The slow copy pauses between writes longer than the polling interval and shorter than a
# file must stay unchanged to be listed (STABLE_SECONDS, 2 s): only that time window keeps
# the copy from being listed early.
SLOW_COPY_PAUSE = (LOOP_SECONDS + STABLE_SECONDS) / 2


def succeeded_runs() -> int:
    return ImportRun.objects.filter(source="connector", status="succeeded").count()


def wait_for_polls(connection: Connection, count: int) -> None:
    """Until the connectors loop has finished `count` more syncs of `connection`: a quiet
    poll records no sync, only moves the connection's last sync time."""
    seen = set()

    def polled() -> bool:
        seen.add(Connection.objects.get(id=connection.id).last_sync_at)
        return len(seen) > count

    wait_for(polled, timeout=30, interval=0.05, what=f"{count} more polls of the folder")


def write_slowly(path, data: bytes, *, pieces: int, pause: float, done: dict) -> None:
    """Write `data` in `pieces`, `pause` seconds apart, as a slow copy would."""
    step = len(data) // pieces + 1
    with open(path, "wb") as fh:
        for start in range(0, len(data), step):
            fh.write(data[start : start + step])
            fh.flush()
            time.sleep(pause)  # the copy's slowness is what the connector must wait out
    done["at"] = timezone.now()


def test_files_dropped_while_it_runs_are_imported_once_and_left_as_they_were(org, tmp_path):
    folder = tmp_path / "inbox"
    folder.mkdir()
    connection = connection_create_local(organisation=org, path=str(folder))
    slow_data = make_pdf(4, words_per_page=400, label="Slow")
    done: dict = {}

    with running_workers(**CONNECTOR_ENV):
        # Files are dropped once the connectors loop polls the (empty) folder.
        wait_for(
            lambda: Connection.objects.get(id=connection.id).last_sync_at,
            timeout=60,
            what="the first poll",
        )
        slow = threading.Thread(
            target=write_slowly,
            args=(folder / "slow.pdf", slow_data),
            kwargs={"pieces": 6, "pause": SLOW_COPY_PAUSE, "done": done},
        )
        slow.start()
        for batch in range(5):
            for n in range(10):
                write(
                    folder, f"batch{batch}/doc{n}.pdf", make_pdf(1 + n % 3, label=f"B{batch}-{n}")
                )
            wait_for_polls(connection, 1)  # a poll between batches: they come in as it runs
        slow.join()
        dropped = fingerprint(folder)

        wait_for(lambda: succeeded_runs() == 51, timeout=240, what="51 imports to succeed")

        # An edit while it runs is a new version of the same document.
        edited = folder / "batch0" / "doc0.pdf"
        edited.write_bytes(make_pdf(6, label="Edited"))
        edited_print = fingerprint(folder)
        wait_for(lambda: succeeded_runs() == 52, timeout=120, what="the edited file's run")
        wait_for_polls(connection, 3)  # nothing more may start

    assert ImportRun.objects.filter(source="connector").count() == 52
    assert ConnectorImport.objects.count() == 52
    slow_import = ConnectorImport.objects.get(file_id="slow.pdf")
    # Listed only once the copy had finished, and with every byte of it.
    assert slow_import.created_at > done["at"]
    slow_document = Document.objects.get(id=slow_import.document_id)
    assert slow_document.sha256 == hashlib.sha256(slow_data).hexdigest()
    assert slow_document.page_count == 4
    document = (
        Document.objects.filter(connector_imports__file_id="batch0/doc0.pdf").distinct().get()
    )
    assert document.version == 2
    assert document.page_count == 6
    charges = UsageEntry.objects.filter(document=document).order_by("document_version")
    assert [(c.document_version, c.pages) for c in charges] == [(1, 1), (2, 6)]
    # The folder is byte for byte and time for time as the test left it.
    assert fingerprint(folder) == edited_print
    assert {k: v for k, v in dropped.items() if k != "batch0/doc0.pdf"} == {
        k: v for k, v in edited_print.items() if k != "batch0/doc0.pdf"
    }
    connection.refresh_from_db()
    assert connection.files_imported == 52 and connection.files_failed == 0
    org.refresh_from_db()
    assert org.pages_reserved == 0
    assert org.pages_used == sum(UsageEntry.objects.values_list("pages", flat=True))
