"""extract: text and the real page count (pypdf / python-docx).

Damaged, encrypted or unreadable input is a permanent error with a message
the uploader can act on.
"""

from botocore.exceptions import BotoCoreError, ClientError

from documents.models import Document, DocumentKind, DocumentText
from documents.storage import storage_open
from jobs.errors import PermanentError, TransientError
from jobs.text import UnreadableInput, extract_docx, extract_pdf

PROGRESS_EVERY_PAGES = 10


def read_document_bytes(document) -> bytes:
    try:
        with storage_open(key=document.storage_key) as fh:
            return fh.read()
    except FileNotFoundError:
        raise PermanentError(
            "The uploaded file is no longer in storage; please upload it again.",
            code="file_missing",
        ) from None
    except (ClientError, BotoCoreError, OSError) as exc:
        raise TransientError(f"storage error: {exc}", code="storage_unavailable") from exc


def run(ctx) -> None:
    document = ctx.document
    data = read_document_bytes(document)

    def on_page(done: int, total: int) -> None:
        if done == total or done % PROGRESS_EVERY_PAGES == 0:
            ctx.progress(done, total)

    try:
        if document.kind == DocumentKind.PDF:
            extracted = extract_pdf(data, on_page=on_page)
        else:
            extracted = extract_docx(data)
    except UnreadableInput as exc:
        raise PermanentError(str(exc), code="unreadable_document") from exc

    with ctx.complete():
        DocumentText.objects.update_or_create(
            document=document,
            version=document.version,
            defaults={"text": extracted.text, "page_count": extracted.page_count},
        )
        Document.objects.filter(id=document.id).update(
            page_count=extracted.page_count, text_chars=len(extracted.text)
        )
