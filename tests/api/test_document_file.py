"""GET /documents/{id}/file: the original bytes, streamed, under the document's name."""

import hashlib
import os
import tracemalloc
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from botocore.config import Config

from core.http import attachment
from documents.models import Document
from documents.storage import storage_delete
from pipeline.engine import execute_stage
from pipeline.models import ImportRun
from tests.support.files import make_docx, make_pdf
from tests.support.folders import local_folder_fixtures, sync, write
from tests.support.runs import drive, unchecked_run
from tests.support.s3 import s3_storage
from tests.support.silent import silent_server
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

_fast_settle, folder, connection = local_folder_fixtures("scans")


def file_url(document_id) -> str:
    return f"/api/v1/documents/{document_id}/file"


def streamed(response) -> bytes:
    assert response.streaming  # never one body in memory
    return b"".join(response.streaming_content)


def test_a_pdf_is_streamed_as_an_attachment_with_its_type_length_and_name(api):
    data = make_pdf(2)
    run = accepted_run(api, data, name="Quarterly report.pdf")

    response = api.get(file_url(run.document_id))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Length"] == str(len(data))
    assert response["Content-Disposition"] == 'attachment; filename="Quarterly report.pdf"'
    assert response["Cache-Control"] == "private, no-store"
    assert streamed(response) == data


def test_a_word_document_is_served_as_one_under_a_name_that_is_not_ascii(api):
    data = make_docx(3)
    run = accepted_run(api, data, name="Übersicht 2024.docx")

    response = api.get(file_url(run.document_id))

    assert response["Content-Type"] == (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    )
    assert response["Content-Disposition"] == (
        "attachment; filename=\"Ubersicht 2024.docx\"; filename*=UTF-8''%C3%9Cbersicht%202024.docx"
    )
    assert streamed(response) == data


def test_another_organisations_a_deleted_and_an_unknown_document_are_the_same_404(api, other_api):
    theirs = accepted_run(other_api, make_pdf(1))
    deleted = accepted_run(api, make_pdf(1))
    assert api.delete(f"/api/v1/documents/{deleted.document_id}").status_code == 204

    answers = [
        api.get(file_url(theirs.document_id)),
        api.get(file_url(deleted.document_id)),
        api.get(file_url("00000000-0000-0000-0000-000000000000")),
    ]

    assert [a.status_code for a in answers] == [404, 404, 404]
    assert {a.content for a in answers} == {
        b'{"detail": "Document not found.", "code": "not_found"}'
    }


def test_a_file_missing_from_storage_is_a_404_that_says_so(api):
    run = accepted_run(api, make_pdf(1))
    storage_delete(key=run.document.storage_key)

    response = api.get(file_url(run.document_id))

    assert response.status_code == 404 and response.json()["code"] == "file_missing"


def test_a_connected_file_is_served_at_its_current_version(api, folder, connection):
    path = write(folder, "report.pdf", make_pdf(1, label="First"))
    sync(connection)
    [first] = sync(connection).counts.run_ids
    assert execute_stage(str(first), "create")["outcome"] == "succeeded"
    document_id = drive(first).document_id
    before = api.get(file_url(document_id))
    edited = make_pdf(2, label="Second")
    path.write_bytes(edited)
    sync(connection)
    [second] = sync(connection).counts.run_ids

    assert drive(second).status == "succeeded"
    assert streamed(before) == make_pdf(1, label="First")
    assert streamed(api.get(file_url(document_id))) == edited


def test_a_connected_file_not_stored_yet_is_a_409(api, folder, connection):
    write(folder, "report.pdf", make_pdf(1))
    sync(connection)
    [run_id] = sync(connection).counts.run_ids
    assert execute_stage(str(run_id), "create")["outcome"] == "succeeded"
    document_id = ImportRun.objects.get(id=run_id).document_id

    response = api.get(file_url(document_id))

    assert response.status_code == 409 and response.json()["code"] == "file_not_stored"


def test_a_file_in_s3_is_a_redirect_to_a_short_lived_url_that_serves_it_as_an_attachment(
    s3, api, org
):
    data = make_pdf(2)
    run = unchecked_run(org, data, kind="pdf", pages=2)
    Document.objects.filter(id=run.document_id).update(filename="Rapport été.pdf")

    response = api.get(file_url(run.document_id))

    assert response.status_code == 302
    assert response["Cache-Control"] == "private, no-store"
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["X-Amz-Expires"] == ["60"]
    assert query["response-content-type"] == ["application/pdf"]
    assert query["response-content-disposition"] == [attachment("Rapport été.pdf")]
    served = httpx.get(response["Location"], timeout=10)
    assert served.status_code == 200 and served.content == data
    assert served.headers["Content-Disposition"] == attachment("Rapport été.pdf")


def test_a_file_missing_from_s3_is_a_404_not_a_redirect_to_nothing(s3, api, org):
    run = unchecked_run(org, make_pdf(1), kind="pdf", pages=1)
    storage_delete(key=run.document.storage_key)

    response = api.get(file_url(run.document_id))

    assert (response.status_code, response.json()["code"]) == (404, "file_missing")


def test_a_file_in_s3_is_streamed_without_being_held_in_memory_when_asked(
    api, org, settings, monkeypatch
):
    settings.PAPERLANE_DOWNLOAD_URL_SECONDS = 0  # clients cannot reach the S3 endpoint
    size = 24 * 1024 * 1024
    with s3_storage(settings, monkeypatch, own_process=True):
        data = os.urandom(size)
        run = unchecked_run(org, data, kind="pdf", pages=1)
        expected = hashlib.sha256(data).hexdigest()
        del data
        tracemalloc.start()
        try:
            response = api.get(file_url(run.document_id))
            digest, received = hashlib.sha256(), 0
            for block in response.streaming_content:
                digest.update(block)
                received += len(block)
            response.close()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

    assert response.status_code == 200 and response["Content-Length"] == str(size)
    assert response["Content-Type"] == "application/pdf"
    assert (received, digest.hexdigest()) == (size, expected)
    assert peak < 4 * 1024 * 1024, f"{peak / 2**20:.1f} MiB held while serving 24 MiB"


@pytest.mark.parametrize("redirect_seconds", [60, 0], ids=["redirect", "streamed"])
def test_s3_not_answering_is_a_503_to_ask_again_after_retry_after(
    s3, api, settings, redirect_seconds
):
    settings.PAPERLANE_DOWNLOAD_URL_SECONDS = redirect_seconds
    run = accepted_run(api, make_pdf(1))
    with silent_server() as port:
        settings.AWS_S3_ENDPOINT_URL = f"http://127.0.0.1:{port}"
        settings.AWS_S3_CLIENT_CONFIG = Config(
            connect_timeout=0.5, read_timeout=0.5, retries={"max_attempts": 1}
        )
        settings.STORAGES = {**settings.STORAGES}  # a new storage, on the silent server

        response = api.get(file_url(run.document_id))

    assert response.status_code == 503, response.status_code
    assert response["Retry-After"] == "60"
    assert response.json()["code"] == "storage_unavailable"
