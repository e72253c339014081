import io
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.isolation import warm_up
from documents import reading
from documents.models import Document, QuotaReservation
from documents.services.organisations import organisation_create
from documents.services.tokens import api_token_create
from pipeline.models import ImportRun, RunTransition
from pipeline.services.accept import MAX_FILENAME_LENGTH
from tests.support import hostile
from tests.support.files import (
    HTML_AS_PDF,
    make_docx,
    make_encrypted_pdf,
    make_owner_only_encrypted_pdf,
    make_pdf,
)
from tests.support.lanes import waiting_job_ids
from tests.support.locks import another_connection
from tests.support.pipeline import wait_for
from tests.support.processes import web_server
from tests.support.uploads import URL, upload

pytestmark = pytest.mark.django_db


def assert_nothing_left(org, media_files):
    assert not ImportRun.objects.filter(organisation=org).exists()
    assert not Document.objects.filter(organisation=org).exists()
    assert not QuotaReservation.objects.filter(organisation=org).exists()
    org.refresh_from_db()
    assert (org.pages_reserved, org.pages_used) == (0, 0)
    assert media_files() == []


def test_it_accepts_a_pdf_and_reserves_its_pages(api, org, media_files):
    response = upload(api, make_pdf(4), name="report.pdf")

    assert response.status_code == 202, response.content
    body = response.json()
    run = ImportRun.objects.get(id=body["run_id"])
    assert body == {
        "run_id": str(run.id),
        "document_id": str(run.document_id),
        "status": "queued",
        "status_url": f"/api/v1/runs/{run.id}",
        "filename": "report.pdf",
        "duplicate_of": None,
    }
    # Its bytes are stored at accept: the run starts at extract, which checks them.
    assert (run.status, run.stage, run.source) == ("queued", "extract", "api")
    assert run.reservation.pages == 4 and not run.reservation.estimated
    org.refresh_from_db()
    assert org.pages_reserved == 4
    assert media_files() == [run.document.storage_key]
    assert RunTransition.objects.filter(run=run, to_status="queued", reason="accepted").exists()


def test_the_organisations_row_is_locked_only_for_the_end_of_the_accept_transaction(api, org):
    # Uploads of one organisation wait for each other on that lock: it is taken after the
    # rows are written (one statement), and only the bound's count follows it.
    with CaptureQueriesContext(connection) as queries:
        assert upload(api, make_pdf(2)).status_code == 202

    sql = [q["sql"] for q in queries.captured_queries]
    lock = next(i for i, s in enumerate(sql) if s.startswith('UPDATE "documents_organisation"'))
    assert sql[lock - 1].startswith("WITH row_0 AS (INSERT INTO")
    assert all(table in sql[lock - 1] for table in ("document", "importrun", "runtransition"))
    after = [s for s in sql[lock + 1 :] if not s.startswith(("RELEASE SAVEPOINT", "COMMIT"))]
    assert len(after) == 1 and "jobs_importrun" in after[0] and "COUNT(*)" in after[0]


def test_it_enqueues_the_first_stage_after_commit(
    api, redis_conn, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        body = upload(api, make_pdf(1)).json()

    assert waiting_job_ids("extract") == [f"run-{body['run_id']}-0-extract-0"]
    assert waiting_job_ids("store") == []


@pytest.mark.parametrize(
    "sent, kind, stored",
    [
        ("a.txt", "pdf", "a.txt.pdf"),
        ("scan", "pdf", "scan.pdf"),
        ("REPORT.PDF", "pdf", "REPORT.PDF"),
        ("letter.pdf", "docx", "letter.pdf.docx"),
        ("notes.docx", "docx", "notes.docx"),
    ],
)
def test_a_name_whose_extension_says_another_type_gets_the_right_one(api, sent, kind, stored):
    data = make_pdf(1) if kind == "pdf" else make_docx(1)

    response = upload(api, data, name=sent)

    assert response.status_code == 202, response.content
    assert response.json()["filename"] == stored
    assert Document.objects.get(id=response.json()["document_id"]).filename == stored


def test_a_long_name_keeps_its_length_bound_when_its_extension_is_added(api):
    sent = "x" * MAX_FILENAME_LENGTH

    response = upload(api, make_pdf(1), name=sent)

    stored = response.json()["filename"]
    assert len(stored) == MAX_FILENAME_LENGTH and stored.endswith("x.pdf")


def test_the_run_can_be_polled(api):
    body = upload(api, make_pdf(2)).json()

    response = api.get(body["status_url"])

    assert response.status_code == 200
    run = response.json()
    assert run["id"] == body["run_id"]
    assert run["status"] == "queued"
    assert run["stage"] == "extract"
    assert run["progress"] is None
    assert (run["attempts"], run["stage_attempts"]) == (0, 0)
    assert run["error"] is None
    assert run["document_id"] == body["document_id"]
    assert run["page_count"] is None


def test_a_docx_reserves_the_page_count_its_properties_state(api, org):
    response = upload(api, make_docx(3, pages_property=7), name="notes.docx")

    assert response.status_code == 202, response.content
    run = ImportRun.objects.get(id=response.json()["run_id"])
    assert run.document.kind == "docx"
    assert (run.reservation.pages, run.reservation.estimated) == (7, True)


def test_a_docx_without_page_property_is_estimated_from_its_words(api, monkeypatch):
    monkeypatch.setattr(reading, "DOCX_WORDS_PER_PAGE", 100)
    # 12 paragraphs of 2 + 80 words = 984 words -> 10 pages at 100 words a page.
    response = upload(api, make_docx(12, words_per_paragraph=80), name="notes.docx")

    run = ImportRun.objects.get(id=response.json()["run_id"])
    assert run.reservation.pages == 10


def test_an_owner_password_only_pdf_is_accepted(api):
    response = upload(api, make_owner_only_encrypted_pdf(3))

    assert response.status_code == 202, response.content
    assert ImportRun.objects.get(id=response.json()["run_id"]).reservation.pages == 3


@pytest.mark.parametrize(
    ("data", "name", "status", "code"),
    [
        (b"", "empty.pdf", 400, "empty_file"),
        (HTML_AS_PDF, "invoice.pdf", 415, "unsupported_type"),
        (make_pdf(5)[:-400], "truncated.pdf", 422, "truncated_pdf"),
        (make_pdf(5)[:400] + b"\n%%EOF\n", "gutted.pdf", 422, "damaged_pdf"),
        (make_encrypted_pdf(), "secret.pdf", 422, "encrypted_pdf"),
        (make_pdf(1), "../../etc/passwd.pdf", 400, "invalid_filename"),
        (make_pdf(1), "..\\..\\boot.pdf", 400, "invalid_filename"),
        (make_pdf(1), "bad\x00name.pdf", 400, "invalid_filename"),
        (make_pdf(1), "\uff0e\uff0e\uff0f\uff0e\uff0e\uff0fevil.pdf", 400, "invalid_filename"),
        (make_pdf(1), "\u2025\uff3cevil.pdf", 400, "invalid_filename"),
        (b"PK\x03\x04" + b"\x00" * 100, "broken.docx", 422, "damaged_docx"),
        (b"\xd0\xcf\x11\xe0" + b"\x00" * 100, "old.doc", 415, "unsupported_type"),
        (hostile.docx_quadratic_text_runs(24_000), "runs.docx", 422, "damaged_docx"),
        (hostile.zip_with_huge_directory(100_000), "directory.docx", 422, "docx_too_large"),
    ],
    ids=[
        "empty",
        "html-renamed-pdf",
        "truncated-pdf",
        "gutted-pdf",
        "encrypted-pdf",
        "path-traversal",
        "windows-traversal",
        "nul-in-name",
        "fullwidth-traversal",
        "two-dot-leader-and-fullwidth-backslash",
        "corrupt-docx",
        "legacy-doc",
        "unclosed-text-tags-docx",
        "huge-zip-directory",
    ],
)
def test_bad_input_is_refused_and_leaves_nothing(api, org, media_files, data, name, status, code):
    response = upload(api, data, name=name)

    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code
    assert len(body["detail"]) > 10
    assert_nothing_left(org, media_files)


def test_a_pdf_declaring_two_million_objects_is_a_422_within_a_second(api, org, media_files):
    warm_up()  # a web process starts its fork server when it loads (config/wsgi.py)
    crafted = hostile.pdf_with_huge_xref_stream(2_000_000)

    started = time.monotonic()
    response = upload(api, crafted, name="crafted.pdf")

    assert time.monotonic() - started < 1
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "pdf_too_complex" and "2,000,000 objects" in body["detail"]
    assert_nothing_left(org, media_files)


def test_an_oversized_file_gets_413(api, org, media_files, settings):
    settings.PAPERLANE_MAX_UPLOAD_BYTES = 50_000

    response = upload(api, make_pdf(100))

    assert response.status_code == 413
    assert "50000" in response.json()["detail"]
    assert_nothing_left(org, media_files)


def test_a_missing_file_field_is_a_400_not_a_500(api):
    response = api.post(URL, {"other": "x"})

    assert response.status_code == 400
    assert response.json()["code"] == "missing_file"


def test_a_zip_that_is_not_a_word_document_gets_415(api, org, media_files):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "hello")

    response = upload(api, buffer.getvalue(), name="archive.docx")

    assert response.status_code == 415
    assert "not a Word document" in response.json()["detail"]
    assert_nothing_left(org, media_files)


def test_over_quota_gets_402_with_pages_left(api, org, media_files):
    org.page_limit = 3
    org.save(update_fields=["page_limit"])

    response = upload(api, make_pdf(4))

    assert response.status_code == 402
    body = response.json()
    assert (body["pages_requested"], body["pages_available"]) == (4, 3)
    assert "3" in body["detail"]
    assert_nothing_left(org, media_files)


def test_idempotency_key_replays_the_first_answer(api, org, media_files):
    pdf = make_pdf(2)
    first = upload(api, pdf, **{"Idempotency-Key": "abc-123"})
    second = upload(api, pdf, **{"Idempotency-Key": "abc-123"})

    assert first.status_code == second.status_code == 202
    assert first.json() == second.json()
    assert ImportRun.objects.filter(organisation=org).count() == 1
    org.refresh_from_db()
    assert org.pages_reserved == 2
    assert len(media_files()) == 1


def test_idempotency_key_reused_for_another_file_is_refused(api, org):
    assert upload(api, make_pdf(2), **{"Idempotency-Key": "k1"}).status_code == 202

    response = upload(api, make_pdf(3), **{"Idempotency-Key": "k1"})

    assert response.status_code == 400
    assert response.json()["code"] == "idempotency_key_reused"
    assert ImportRun.objects.filter(organisation=org).count() == 1


def test_the_same_idempotency_key_in_two_organisations_is_two_runs(api, other_api):
    pdf = make_pdf(1)
    a = upload(api, pdf, **{"Idempotency-Key": "shared"}).json()
    b = upload(other_api, pdf, **{"Idempotency-Key": "shared"}).json()

    assert a["run_id"] != b["run_id"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_uploads_racing_with_one_idempotency_key_make_one_run(media_files):
    # Both get past their checks before either commits: the organisation's row is held
    # (as another upload's transaction would) until both wait, one on that lock and one
    # on the key's unique index. The second then answers with the first's run.
    org = organisation_create(slug="racing", page_limit=1000)

    first, second = _racing_uploads(org, make_pdf(2), {"Idempotency-Key": "nightly-42"})

    assert first.status_code == second.status_code == 202, (first.text, second.text)
    assert first.json()["run_id"] == second.json()["run_id"]
    assert ImportRun.objects.filter(organisation=org).count() == 1
    org.refresh_from_db()
    assert org.pages_reserved == 2
    assert len(media_files()) == 1  # the second upload's bytes were deleted again


def _racing_uploads(org, pdf: bytes, headers: dict) -> tuple[httpx.Response, httpx.Response]:
    """Two uploads of `pdf` to the organisation, from two web processes, both past their
    checks before either commits: its row is held (as another upload's transaction
    would) until both wait on a lock, then let go."""
    _, raw = api_token_create(organisation=org)

    def post(base: str) -> httpx.Response:
        with httpx.Client(timeout=30) as client:
            return client.post(
                f"{base}/api/v1/documents",
                files={"file": ("a.pdf", pdf)},
                headers={"Authorization": f"Bearer {raw}", **headers},
            )

    with (
        another_connection() as holder,
        another_connection(autocommit=True) as watcher,
        web_server(workers=2, threads=2) as base,
        ThreadPoolExecutor(2) as pool,
    ):
        holder.execute("SELECT 1 FROM documents_organisation WHERE id = %s FOR UPDATE", [org.id])
        answers = [pool.submit(post, base) for _ in range(2)]
        wait_for(lambda: lock_waits(watcher) == 2, timeout=20, what="both uploads to wait")
        holder.commit()
        first, second = (answer.result() for answer in answers)
    return first, second


def lock_waits(conn) -> int:
    query = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    return conn.execute(query).fetchone()[0]


# --- The same bytes again ------------------------------------------------------------


def test_the_same_bytes_again_answer_200_with_the_first_document_and_charge_nothing(
    api, org, media_files
):
    first = upload(api, make_pdf(3), name="report.pdf").json()

    again = upload(api, make_pdf(3), name="report (1).pdf")

    assert again.status_code == 200, again.content
    assert again.json() == {**first, "duplicate_of": first["document_id"]}
    assert Document.objects.filter(organisation=org).count() == 1
    assert ImportRun.objects.filter(organisation=org).count() == 1
    org.refresh_from_db()
    assert org.pages_reserved == 3
    assert len(media_files()) == 1


def test_allow_duplicate_keeps_a_second_copy_charged_as_its_own(api, org, media_files):
    first = upload(api, make_pdf(3)).json()

    copy = api.post(
        f"{URL}?allow_duplicate=true", {"file": SimpleUploadedFile("b.pdf", make_pdf(3))}
    )

    assert copy.status_code == 202, copy.content
    assert copy.json()["document_id"] != first["document_id"]
    assert copy.json()["duplicate_of"] is None
    org.refresh_from_db()
    assert org.pages_reserved == 6
    assert len(media_files()) == 2


def test_a_deleted_document_or_another_organisations_is_no_duplicate(api, other_api, org):
    first = upload(api, make_pdf(2)).json()
    assert api.delete(f"{URL}/{first['document_id']}").status_code == 204

    assert upload(api, make_pdf(2)).status_code == 202
    assert upload(other_api, make_pdf(2)).status_code == 202


def test_a_duplicate_is_answered_even_with_no_pages_left(api, org):
    first = upload(api, make_pdf(3)).json()
    org.page_limit = 3
    org.save(update_fields=["page_limit"])

    again = upload(api, make_pdf(3))

    assert again.status_code == 200
    assert again.json()["duplicate_of"] == first["document_id"]


def test_an_idempotency_key_replay_stays_a_202_of_the_first_request(api, org):
    pdf = make_pdf(2)
    first = upload(api, pdf, **{"Idempotency-Key": "k-dup"})
    second = upload(api, pdf, **{"Idempotency-Key": "k-dup"})

    assert first.status_code == second.status_code == 202
    assert first.json() == second.json()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_uploads_of_the_same_bytes_racing_make_one_charged_document(media_files):
    # Both get past their checks before either commits: the organisation's row is held
    # (as another upload's transaction would) until both wait. The second then finds the
    # first's document and is answered with it.
    org = organisation_create(slug="racing-twins", page_limit=1000)

    answers = _racing_uploads(org, make_pdf(2), {})
    statuses = sorted(answer.status_code for answer in answers)
    bodies = [answer.json() for answer in answers]

    assert statuses == [200, 202], bodies
    assert bodies[0]["document_id"] == bodies[1]["document_id"]
    assert Document.objects.filter(organisation=org).count() == 1
    org.refresh_from_db()
    assert org.pages_reserved == 2
    assert len(media_files()) == 1  # the second upload's bytes were deleted again
