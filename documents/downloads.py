"""A document's file as an answer to whoever asked for it (a member's page or the API):
one place that names the attachment (core.disposition.attachment) and streams it."""

from django.http import FileResponse, HttpResponse, HttpResponseRedirect

from core.disposition import attachment
from documents.models import Document
from documents.storage import StoredStream
from formats.base import MEDIA_TYPES

# Blocks of 64 KiB rather than FileResponse's 4 KiB: a read from S3 is a call through
# botocore.
FILE_BLOCK_BYTES = 64 * 1024


def document_file_response(*, document: Document, stored: StoredStream | str) -> HttpResponse:
    """The answer that serves `stored` (from documents.selectors.document_file): the
    bytes, streamed a block at a time and closed at the end, as an attachment under the
    document's name; or a redirect to the short-lived URL that serves them. Neither is
    kept by a cache on the way."""
    if isinstance(stored, str):
        response = HttpResponseRedirect(stored)
    else:
        response = FileResponse(stored.file, content_type=MEDIA_TYPES[document.kind])
        response.block_size = FILE_BLOCK_BYTES
        response["Content-Length"] = str(stored.size)
        response["Content-Disposition"] = attachment(document.filename)
    response["Cache-Control"] = "private, no-store"
    return response
