"""A failed document's page says what happened to it and what can be done, from its real
state and source: the folder and file a connected file came from (fixed there, picked up
by the next sync, never "upload a corrected file"), and no "once it is processed" for a
document whose processing has ended without success."""

import pytest

from pipeline.services.people import run_cancel
from pipeline.services.transitions import SWEEPER
from tests.support.files import make_encrypted_pdf, make_pdf
from tests.support.folders import local_folder_fixtures, sync, write
from tests.support.pages import page_text
from tests.support.runs import drive, unchecked_run
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

_fast_settle, folder, connection = local_folder_fixtures("scans")


def test_a_connected_files_failure_names_its_folder_and_file_and_says_to_fix_it_there(
    folder, connection, member_client
):
    write(folder, "contracts/locked.pdf", make_encrypted_pdf())
    sync(connection)
    [run_id] = sync(connection).counts.run_ids
    run = drive(run_id)
    assert (run.status, run.error_code) == ("failed", "encrypted_pdf")

    page = page_text(member_client.get(f"/documents/{run.document_id}/"))
    listing = page_text(member_client.get("/"))

    # Where it came from, by the folder's and the file's real names.
    assert "Source Connected folder (Local folder)" in page
    assert f"Folder {connection.folder_path} File contracts/locked.pdf" in page
    assert "folder folder" not in page.lower()
    # What happened, and what can be done: fix it where it lives.
    assert "version ?" not in page and "?" not in page.split("Runs", 1)[1]
    assert "once it is processed" not in page and "not counted yet" not in page
    assert "once it has been read" not in page
    assert "No: its processing failed (see Processing)" in page
    assert "No text: its processing failed before its text was read" in page
    assert "No chunks: its processing failed before its text was split" in page
    assert (
        "fix contracts/locked.pdf in its folder "
        f"({connection.folder_path}); the next sync picks up the corrected file" in page
    )
    for shown in (page, listing):
        assert "Upload a corrected file" not in shown
        assert "Fix the file in its folder" in shown


def test_an_uploads_failure_says_it_failed_and_still_offers_a_corrected_upload(org, member_client):
    protected = drive(unchecked_run(org, make_encrypted_pdf(), kind="pdf", pages=2).id)
    assert (protected.status, protected.error_code) == ("failed", "encrypted_pdf")

    page = page_text(member_client.get(f"/documents/{protected.document_id}/"))

    assert "Source API" in page
    assert "once it is processed" not in page and "not counted yet" not in page
    assert "No: its processing failed (see Processing)" in page
    assert "Upload a corrected file" in page
    assert "fix the file and upload the corrected one" in page


def test_a_cancelled_document_says_so_and_one_in_progress_waits(org, api, member_client):
    waiting = accepted_run(api, make_pdf(1), "waiting.pdf")
    stopped = accepted_run(api, make_pdf(1), "stopped.pdf")
    run_cancel(run=stopped, actor=SWEEPER)

    queued = page_text(member_client.get(f"/documents/{waiting.document_id}/"))
    cancelled = page_text(member_client.get(f"/documents/{stopped.document_id}/"))

    assert "Not yet: once it is processed" in queued and "not counted yet" in queued
    assert "No text yet: it is shown here once it has been read" in queued
    assert "No: its processing was cancelled (see Processing)" in cancelled
    assert "once it is processed" not in cancelled
