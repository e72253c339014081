"""How request bodies are read: one file per upload, bounded, and nothing kept for strangers."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from django.test import Client, RequestFactory

from core.upload_counts import upload_counts
from core.uploads import (
    MULTIPART_OVERHEAD_BYTES,
    RequestSizeLimitMiddleware,
    UploadLimitHandler,
    upload_refusal,
)
from pipeline.models import ImportRun
from tests.support.files import make_pdf, multipart_body
from tests.support.hostile import multipart_many_files
from tests.support.uploads import URL

pytestmark = pytest.mark.django_db

SPOOLED: list[int] = []


class RecordingTemporaryFileHandler(TemporaryFileUploadHandler):
    """Django's spool-to-disk handler, noting the size of every file it writes."""

    def file_complete(self, file_size):
        SPOOLED.append(file_size)
        return super().file_complete(file_size)


@pytest.fixture
def spooled(settings):
    """Every upload goes through the disk spool, which records what it wrote."""
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 0
    settings.FILE_UPLOAD_HANDLERS = [
        "core.uploads.UploadLimitHandler",
        f"{__name__}.RecordingTemporaryFileHandler",
    ]
    SPOOLED.clear()
    return SPOOLED


def test_an_oversized_upload_is_not_kept_while_it_is_read(api, settings):
    settings.PAPERLANE_MAX_UPLOAD_BYTES = 10_000
    body, content_type = multipart_body("big.pdf", make_pdf(40))
    request = RequestFactory().post(URL, body, content_type=content_type)
    request.api_token = object()
    request.upload_handlers = [UploadLimitHandler(request)]

    assert "file" not in request.FILES  # skipped, not spooled
    assert upload_refusal(request).status_code == 413


class Unreadable(io.RawIOBase):
    """A request body that must not be read."""

    def readinto(self, buffer):
        raise AssertionError("the body was read")


def test_a_body_larger_than_one_upload_is_refused_from_its_length_unread(settings, redis_conn):
    settings.PAPERLANE_MAX_UPLOAD_BYTES = 100_000
    request = RequestFactory().post(URL, b"", content_type="multipart/form-data; boundary=x")
    request.META["CONTENT_LENGTH"] = str(100_000 + MULTIPART_OVERHEAD_BYTES + 1)
    request._stream = Unreadable()

    response = RequestSizeLimitMiddleware(lambda request: request.body)(request)

    assert response.status_code == 413
    assert json.loads(response.content)["code"] == "file_too_large"
    counted = upload_counts(connection=redis_conn)
    assert counted[("api", "refused", "file_too_large")] == 1


def test_a_request_with_two_files_is_refused_and_keeps_at_most_one(api, org, spooled):
    body, content_type = multipart_many_files(2, 50_000)

    response = api.post(URL, body, content_type=content_type)

    assert response.status_code == 400
    assert response.json()["code"] == "one_file_per_request"
    assert len(spooled) <= 1
    assert not ImportRun.objects.filter(organisation=org).exists()


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"allow_duplicate": "true"}, "unknown_field"),
        ({"note": "x"}, "unknown_field"),
        # A second file is past the API's bound of one, whatever its field.
        ({"other": SimpleUploadedFile("b.pdf", b"x")}, "one_file_per_request"),
    ],
)
def test_a_form_field_beside_the_file_is_refused_not_ignored(api, org, fields, code):
    upload = SimpleUploadedFile("a.pdf", make_pdf(1), content_type="application/pdf")

    response = api.post(URL, {"file": upload, **fields})

    assert response.status_code == 400
    assert response.json()["code"] == code
    assert not ImportRun.objects.filter(organisation=org).exists()


def test_under_a_path_prefix_the_api_keeps_one_file_and_answers_in_json(
    api, org, spooled, settings
):
    # A site served at /paperlane/: the API's paths there start with /paperlane/api/.
    body, content_type = multipart_many_files(2, 50_000)

    response = api.post(URL, body, content_type=content_type, SCRIPT_NAME="/paperlane")

    assert response.status_code == 400
    assert response.json()["code"] == "one_file_per_request"
    assert len(spooled) <= 1
    settings.PAPERLANE_MAX_UPLOAD_BYTES = 100_000
    request = RequestFactory().post(
        URL, b"", content_type="multipart/form-data; boundary=x", SCRIPT_NAME="/paperlane"
    )
    request.META["CONTENT_LENGTH"] = str(100_000 + MULTIPART_OVERHEAD_BYTES + 1)
    too_large = RequestSizeLimitMiddleware(lambda request: request.body)(request)
    assert too_large.status_code == 413
    assert json.loads(too_large.content)["code"] == "file_too_large"


def test_an_anonymous_multipart_body_spools_nothing(spooled, settings):
    settings.PAPERLANE_MAX_UPLOAD_BYTES = 10_000_000
    body, content_type = multipart_many_files(20, 400_000)

    response = Client().post("/accounts/login/", body, content_type=content_type)

    assert response.status_code == 200  # the login form again, with its errors
    assert spooled == []


def test_an_anonymous_body_over_the_limit_is_refused_unread(spooled, settings):
    settings.PAPERLANE_MAX_UPLOAD_BYTES = 10_000
    body, content_type = multipart_many_files(3, 40_000)

    response = Client().post("/accounts/login/", body, content_type=content_type)

    assert response.status_code == 413
    assert spooled == []


def test_a_member_uploading_one_file_is_spooled_once(member_client, spooled):
    body, content_type = multipart_body("one.pdf", make_pdf(2))

    response = member_client.post("/", body, content_type=content_type)

    assert response.status_code == 302
    assert len(spooled) == 1
