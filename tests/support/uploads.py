"""Uploads through the API, as an integration sends them: the one helper the tests share."""

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from pipeline.models import ImportRun
from tests.support.files import multipart_body

URL = "/api/v1/documents"


def upload(client: Client, data: bytes, name: str = "doc.pdf", *, allow_duplicate=False, **headers):
    """POST `data` as the multipart field `file` (with `?allow_duplicate=true`: a second
    copy of bytes sent before is kept); returns the response."""
    url = f"{URL}?allow_duplicate=true" if allow_duplicate else URL
    if "/" in name or "\\" in name:
        # Django's test client strips folders from names; send what a hostile client would.
        body, content_type = multipart_body(name, data)
        return client.post(url, body, content_type=content_type, headers=headers)
    return client.post(url, {"file": SimpleUploadedFile(name, data)}, headers=headers)


def accepted_run(client: Client, data: bytes, name: str = "doc.pdf", **headers) -> ImportRun:
    """Upload and return the run the 202 names (with its document and reservation). The
    tests send the same generated files again and again, each time as a document of its
    own: a second copy of bytes sent before is asked for (`allow_duplicate`)."""
    response = upload(client, data, name, allow_duplicate=True, **headers)
    assert response.status_code == 202, response.content
    return ImportRun.objects.select_related("document", "reservation").get(
        id=response.json()["run_id"]
    )
