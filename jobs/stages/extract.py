"""extract: text and the real page count (documents.formats).

Damaged, encrypted or unreadable input is a permanent error with a message
the uploader can act on.
"""

from core.errors import ServiceError
from documents.formats import extract
from documents.services.content import document_text_save
from jobs.errors import PermanentError
from jobs.stages.context import StageContext
from jobs.stages.stored_file import open_stored

PROGRESS_EVERY_PAGES = 10


def run(ctx: StageContext) -> None:
    document = ctx.document
    with open_stored(document) as fh:
        data = fh.read()

    def on_page(done: int, total: int) -> None:
        if done == total or done % PROGRESS_EVERY_PAGES == 0:
            ctx.progress(done, total)

    try:
        extracted = extract(document.kind, data, on_page=on_page)
    except ServiceError as exc:
        raise PermanentError(exc.message, code="unreadable_document") from exc

    with ctx.complete():
        document_text_save(
            document=document, text=extracted.text, page_count=extracted.page_count
        )
