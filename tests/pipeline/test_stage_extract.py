"""The extract stage on PostgreSQL: the stored bytes checked against the upload, clean
text, real page counts, quota checked again, readable errors for unreadable documents,
permanent errors not retried."""

import time

import pytest

from documents import reading
from documents.models import (
    Chunk,
    Document,
    DocumentText,
    Organisation,
    QuotaReservation,
    UsageEntry,
)
from documents.storage import storage_delete
from formats import extract
from pipeline.engine import execute_stage
from pipeline.models import RunTransition, StageAttempt
from pipeline.stage_list import stage_spec
from pipeline.stages import extract as extract_stage
from tests.support import hostile, real_world
from tests.support.crash import crash_reading
from tests.support.files import make_damaged_pdf, make_encrypted_pdf, make_pdf
from tests.support.runs import drive, stored_bytes_replace, unchecked_run
from tests.support.uploads import accepted_run, upload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("same_size", [False, True], ids=["other_size", "same_size"])
def test_an_upload_whose_stored_file_changed_after_accept_fails_and_is_never_extracted(
    api, org, monkeypatch, same_size
):
    run = accepted_run(api, make_pdf(2, label="Page"))
    changed = make_pdf(2, label="Edit") if same_size else make_pdf(3)
    assert (len(changed) == run.document.size_bytes) == same_size
    stored_bytes_replace(run.document, changed)
    extractions = []
    monkeypatch.setattr(
        extract_stage, "run_isolated", lambda *args, **kwargs: extractions.append(args)
    )

    run = drive(run.id)

    assert (run.status, run.stage, run.error_code) == ("failed", "extract", "file_mismatch")
    assert "does not match the upload" in run.error_message
    assert extractions == []
    attempts = list(StageAttempt.objects.filter(run=run).values_list("stage", "outcome"))
    assert attempts == [("extract", "permanent_error")]
    assert not DocumentText.objects.filter(document=run.document_id).exists()
    assert QuotaReservation.objects.get(run=run).status == "released"
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)
    body = api.get(f"/api/v1/runs/{run.id}").json()
    assert (body["status"], body["error"]["code"]) == ("failed", "file_mismatch")


def test_an_upload_whose_stored_file_is_gone_fails_at_extract(api):
    run = accepted_run(api, make_pdf(1))
    storage_delete(key=run.document.storage_key)

    run = drive(run.id)

    assert (run.status, run.stage, run.error_code) == ("failed", "extract", "file_missing")
    assert "no longer in storage" in run.error_message
    attempts = list(StageAttempt.objects.filter(run=run).values_list("stage", "outcome"))
    assert attempts == [("extract", "permanent_error")]


@pytest.mark.parametrize(
    ("data", "message", "code"),
    [
        (make_damaged_pdf(3), "damaged", "damaged_pdf"),
        (make_encrypted_pdf(3), "password", "encrypted_pdf"),
    ],
    ids=["damaged", "encrypted"],
)
def test_unreadable_pdfs_fail_after_one_attempt_with_a_readable_error(
    org, api, data, message, code
):
    run = drive(unchecked_run(org, data, kind="pdf", pages=3).id)

    assert run.status == "failed"
    assert message in run.error_message
    attempts = list(StageAttempt.objects.filter(run=run, stage="extract"))
    assert [a.outcome for a in attempts] == ["permanent_error"]
    assert QuotaReservation.objects.get(run=run).status == "released"
    body = api.get(f"/api/v1/runs/{run.id}").json()
    assert body["status"] == "failed"
    assert body["error"]["code"] == code
    assert message in body["error"]["message"]


def test_text_with_nul_characters_is_cleaned_and_stored(api):
    run = drive(accepted_run(api, hostile.pdf_with_nul_text(2)).id)

    assert run.status == "succeeded", run.error_message
    text = DocumentText.objects.get(document=run.document_id).text
    assert "Page" in text and "\x00" not in text
    assert StageAttempt.objects.filter(run=run, stage="extract").count() == 1


def test_an_error_whose_text_holds_a_nul_is_recorded_and_fails_the_run_at_once(org, api):
    # PDFium cannot open it; pypdf, which can, refuses its page's filter.
    data = hostile.pdf_with_nul_in_filter_name(trailer_root=False)
    run = drive(unchecked_run(org, data, kind="pdf", pages=1).id)

    assert (run.status, run.error_code) == ("failed", "damaged_pdf")
    [attempt] = StageAttempt.objects.filter(run=run, stage="extract")
    assert attempt.outcome == "permanent_error"
    assert "Foo\\x00Bar" in attempt.traceback and "\x00" not in attempt.traceback
    reasons = RunTransition.objects.filter(run=run).values_list("reason", flat=True)
    assert any("damaged" in reason for reason in reasons)


def test_a_pdf_is_charged_its_real_pages_not_the_count_it_states(api, org):
    run = accepted_run(api, hostile.pdf_with_lying_count(real_pages=40, stated=1))
    assert run.reservation.pages == 1

    run = drive(run.id)

    assert run.status == "succeeded", run.error_message
    assert UsageEntry.objects.get(document=run.document_id).pages == 40
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (40, 0)


def test_a_pdf_with_an_unreadable_page_succeeds_charged_its_pages_and_names_the_page(
    api, org, member_client
):
    # Read by pypdf (PDFium refuses the file), which cannot read page 2's content.
    data = make_pdf(3, label="Leaf", broken_pages={2}, trailer_root=False)
    run = drive(accepted_run(api, data).id)

    assert run.status == "succeeded", run.error_message
    assert UsageEntry.objects.get(document=run.document_id).pages == 3  # the document's own
    shown = api.get(f"/api/v1/runs/{run.id}").json()
    assert (shown["page_count"], shown["unreadable_pages"], shown["text_engine"]) == (
        3,
        [2],
        "pypdf",
    )
    document = api.get(f"/api/v1/documents/{run.document_id}").json()
    assert (document["unreadable_pages"], document["text_engine"]) == ([2], "pypdf")
    text = DocumentText.objects.get(document=run.document_id).text
    assert "Leaf 1" in text and "Leaf 3" in text and "Leaf 2" not in text
    assert "Page 2 could not be read" in member_client.get("/").content.decode()


def test_a_docx_stating_one_page_is_charged_by_its_words(api, org, monkeypatch):
    monkeypatch.setattr(reading, "DOCX_WORDS_PER_PAGE", 500)
    # Its text repeats itself, so its markup compresses past what accept allows.
    monkeypatch.setattr(reading, "DOCX_MAX_COMPRESSION_RATIO", 10_000)
    run = accepted_run(api, hostile.docx_many_words(200_000, stated_pages=1), name="long.docx")
    # One page stated, two for its 1.3 MiB of markup: its words are not counted at accept.
    assert run.reservation.pages == 2

    run = drive(run.id)

    assert run.status == "succeeded", run.error_message
    assert UsageEntry.objects.get(document=run.document_id).pages == 400


def test_a_document_over_quota_once_counted_fails_before_embed_and_gives_pages_back(api, org):
    Organisation.objects.filter(id=org.id).update(page_limit=10)
    run = accepted_run(api, hostile.pdf_with_lying_count(real_pages=40, stated=1))

    run = drive(run.id)

    assert (run.status, run.stage, run.error_code) == ("failed", "extract", "quota_exceeded")
    assert "40 pages" in run.error_message and "9 pages left" in run.error_message
    assert not StageAttempt.objects.filter(run=run, stage="embed").exists()
    assert not Chunk.objects.filter(document=run.document_id).exists()
    assert QuotaReservation.objects.get(run=run).status == "released"
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)


def test_one_page_left_cannot_make_a_worker_extract_a_5000_page_file_stating_one(api, org):
    # 5,000 real pages, /Count 1: accepted for one page, the last one the quota has.
    Organisation.objects.filter(id=org.id).update(page_limit=1)
    run = accepted_run(api, hostile.pdf_with_lying_count(real_pages=5000, stated=1))
    assert run.reservation.pages == 1

    started = time.monotonic()
    run = drive(run.id)
    elapsed = time.monotonic() - started

    assert (run.status, run.stage, run.error_code) == ("failed", "extract", "quota_exceeded")
    assert run.error_message == (
        "The document has 5000 pages, more than were held for it at upload (1), and your "
        "quota has only 0 pages left. Nothing was charged."
    )
    # It stopped once the pages were counted: no page's text was read (extracting them
    # all takes about 10 s here, counting them 1.5 s).
    assert run.progress_done == 0
    assert elapsed < 6
    assert not DocumentText.objects.filter(document=run.document_id).exists()
    assert QuotaReservation.objects.get(run=run).status == "released"
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)


def test_a_document_that_fits_what_is_held_and_left_exactly_is_extracted_and_charged(api, org):
    Organisation.objects.filter(id=org.id).update(page_limit=40)
    run = accepted_run(api, hostile.pdf_with_lying_count(real_pages=40, stated=1))

    run = drive(run.id)

    assert run.status == "succeeded", run.error_message
    assert UsageEntry.objects.get(document=run.document_id).pages == 40


def test_a_docx_stops_being_read_once_its_words_pass_what_it_may_be_charged(api, org, monkeypatch):
    monkeypatch.setattr(reading, "DOCX_WORDS_PER_PAGE", 500)
    monkeypatch.setattr(reading, "DOCX_MAX_COMPRESSION_RATIO", 10_000)
    Organisation.objects.filter(id=org.id).update(page_limit=10)
    data = hostile.docx_many_words(200_000, stated_pages=1)  # 400 pages of words
    run = accepted_run(api, data, name="long.docx")

    run = drive(run.id)

    assert (run.status, run.stage, run.error_code) == ("failed", "extract", "quota_exceeded")
    assert run.error_message.startswith("The document has more than 10 pages,")
    assert not DocumentText.objects.filter(document=run.document_id).exists()
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)


def test_a_database_data_error_fails_the_run_after_one_attempt(api, monkeypatch):
    def save_refused_text(*, document, extracted):
        DocumentText.objects.create(document=document, version=1, text="\x00", page_count=1)

    monkeypatch.setattr(extract_stage, "document_text_save", save_refused_text)

    run = drive(accepted_run(api, make_pdf(2)).id)

    assert (run.status, run.error_code) == ("failed", "unstorable_data")
    [attempt] = StageAttempt.objects.filter(run=run, stage="extract")
    assert (attempt.error_code, attempt.error_type) == (
        "unstorable_data",
        "django.db.utils.DataError",
    )
    assert "NUL" in attempt.error_message and "NUL" not in run.error_message


def test_an_unforeseen_error_is_retried_and_its_class_recorded(api, monkeypatch, settings):
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 2
    settings.PAPERLANE_RETRY_BASE_SECONDS = 0.01

    def broken(*args, **kwargs):
        raise ValueError("internal detail /srv/secret/path")

    monkeypatch.setattr(extract_stage, "document_text_save", broken)
    run = accepted_run(api, make_pdf(1))
    execute_stage(str(run.id), "extract")

    run.refresh_from_db()
    assert (run.status, run.error_code) == ("processing", "unexpected_error")
    assert run.error_message == (
        "A temporary problem interrupted the extract step; it will be tried again."
    )
    run = drive(run.id)

    assert run.status == "dead_letter"
    attempts = list(StageAttempt.objects.filter(run=run, stage="extract"))
    assert [a.outcome for a in attempts] == ["transient_error", "transient_error"]
    assert {a.error_type for a in attempts} == {"builtins.ValueError"}
    assert "/srv/secret/path" in attempts[0].error_message
    assert "/srv/secret/path" not in run.error_message
    # The history is for operators: it may say what went wrong.
    assert RunTransition.objects.filter(run=run, reason__contains="ValueError").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("data", "name", "setting", "code", "says"),
    [
        (
            # PDFium reads a page of it in about 0.05 s of CPU here, each page's text within
            # the limit of one page: 200 pages are far over the limit on any machine.
            hostile.pdf_with_shared_heavy_content(200, stream_mb=0.15),
            "heavy.pdf",
            # The text of the whole document is not what ends it first either.
            {"PAPERLANE_EXTRACT_CPU_SECONDS": 2, "PAPERLANE_MAX_CHARS_PER_DOCUMENT": 10**9},
            "extract_cpu_limit",
            "more than 2 s of CPU",
        ),
        (
            hostile.docx_outgrowing_memory(),
            "inflating.docx",
            # Read as it streams past, its text outgrows the memory only with no limit on
            # the characters of a document.
            {"PAPERLANE_EXTRACT_MEMORY_MB": 256, "PAPERLANE_MAX_CHARS_PER_DOCUMENT": 10**9},
            "extract_memory_limit",
            "more than 256 MB of memory",
        ),
    ],
    ids=["cpu", "memory"],
)
def test_a_document_over_an_extraction_limit_fails_naming_it(
    api, org, settings, monkeypatch, data, name, setting, code, says
):
    # The Word file inflates as no real one does; here what extraction does with it counts.
    monkeypatch.setattr(reading, "DOCX_MAX_COMPRESSION_RATIO", 10_000)
    for key, value in setting.items():
        setattr(settings, key, value)
    settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 100_000
    Organisation.objects.filter(id=org.id).update(page_limit=10_000_000)

    run = drive(accepted_run(api, data, name=name).id)

    assert (run.status, run.stage, run.error_code) == ("failed", "extract", code)
    assert says in run.error_message and "the limit for a document of its size" in run.error_message
    assert QuotaReservation.objects.get(run=run).status == "released"


def test_an_extraction_that_fails_after_seconds_of_cpu_holds_its_organisations_uploads(
    api, other_api, org, settings
):
    settings.PAPERLANE_EXTRACT_CPU_SECONDS = 2
    settings.PAPERLANE_MAX_CHARS_PER_DOCUMENT = 10**9
    heavy = hostile.pdf_with_shared_heavy_content(200, stream_mb=0.15)
    run = drive(accepted_run(api, heavy, name="heavy.pdf").id)
    assert run.error_code == "extract_cpu_limit"

    refused = upload(api, make_pdf(1), "next.pdf")
    other = upload(other_api, make_pdf(1), "other.pdf")

    assert refused.status_code == 429, refused.content
    assert refused.json()["code"] == "busy", refused.content
    # The 2 s of CPU the failure cost, less what has passed since.
    assert 1 <= int(refused.headers["Retry-After"]) <= 2
    assert "recent documents failed" in refused.json()["detail"]
    assert other.status_code == 202, other.content


def burn_then_extract(*args, progress, **kwargs):
    """The real extraction after 0.3 s of CPU, in the isolated child."""
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    return extract(*args, progress=progress, **kwargs)


def test_the_attempts_cpu_counts_its_isolated_child(api, monkeypatch):
    monkeypatch.setattr(extract_stage, "extract", burn_then_extract)
    run = accepted_run(api, make_pdf(1))

    assert execute_stage(str(run.id), "extract")["outcome"] == "succeeded"
    attempt = StageAttempt.objects.get(run=run.id, stage="extract")
    # The worker's own thread only waits meanwhile: the CPU is the child's.
    assert attempt.cpu_ms >= 280


@pytest.mark.parametrize(("timeout", "wall"), [(None, 270), (60, 50), (1000, 370)])
def test_the_extraction_childs_clock_ends_before_the_stage_times_out(settings, timeout, wall):
    settings.PAPERLANE_EXTRACT_CPU_SECONDS = 240
    settings.PAPERLANE_STAGE_TIMEOUTS = {"extract": timeout} if timeout else {}

    timeout = stage_spec("extract").timeout
    assert extract_stage.isolation_limits(timeout=timeout).wall_seconds == wall


def test_a_reader_that_crashes_fails_only_its_document_and_the_worker_goes_on(api, monkeypatch):
    monkeypatch.setattr(extract_stage, "extract", crash_reading)
    crashed = drive(accepted_run(api, make_pdf(2)).id)

    assert (crashed.status, crashed.error_code) == ("failed", "extract_crashed")
    assert "crashed the reader" in crashed.error_message and "SIGSEGV" in crashed.error_message
    # Tried once: the same file would crash it again.
    assert StageAttempt.objects.filter(run=crashed, stage="extract").count() == 1

    monkeypatch.undo()
    after = drive(accepted_run(api, make_pdf(2, label="After")).id)
    assert after.status == "succeeded", after.error_message
    assert "After 2" in DocumentText.objects.get(document=after.document_id).text


def test_a_scan_without_text_succeeds_and_its_page_is_named_as_having_none(
    api, org, member_client, settings
):
    # Languages OCR cannot read here, as on a server without OCR (read: test_stage_ocr.py).
    settings.PAPERLANE_OCR_LANGUAGES = "qqq"
    scan = (real_world.FOLDER / "congress-gray.pdf").read_bytes()
    run = drive(accepted_run(api, scan, name="scan.pdf").id)

    assert run.status == "succeeded", run.error_message
    document = Document.objects.get(id=run.document_id)
    assert (document.page_count, document.textless_pages, document.text_engine) == (
        1,
        [1],
        "pdfium",
    )
    assert UsageEntry.objects.get(document=document).pages == 1
    shown = api.get(f"/api/v1/documents/{document.id}").json()
    assert (shown["textless_pages"], shown["text_engine"]) == ([1], "pdfium")
    assert api.get(f"/api/v1/runs/{run.id}").json()["textless_pages"] == [1]
    page = member_client.get("/").content.decode()
    assert "1 of 1 page has no text; OCR is not available on this server" in page
