"""extract: text and the real page count (pypdf / python-docx).

Damaged, encrypted or unreadable input is a permanent error with a message
the uploader can act on.
"""

from documents.models import Document, DocumentKind, DocumentText
from jobs.errors import PermanentError
from jobs.stages.stored_file import open_stored
from jobs.text import UnreadableInput, extract_docx, extract_pdf

PROGRESS_EVERY_PAGES = 10


def run(ctx) -> None:
    document = ctx.document
    with open_stored(document) as fh:
        data = fh.read()

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
