"""The member pages' test helpers: people of each role signed in, many documents made at
once through the ORM (the documents list's paging needs rows, not uploads), and a
document whose text is given page by page."""

import hashlib
import uuid
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from documents.models import Document, Organisation
from documents.services.content import document_text_save
from documents.services.organisations import member_add
from formats.base import PAGE_BREAK, Extracted

PASSWORD = "correct horse battery"


def signed_in(organisation: Organisation, username: str, role: str) -> Client:
    """A client signed in as `username`, a `role` of the organisation."""
    member_add(organisation=organisation, username=username, password=PASSWORD, role=role)
    client = Client()
    assert client.login(username=username, password=PASSWORD)
    return client


def documents_made(
    organisation: Organisation, count: int, *, prefix: str = "doc"
) -> list[Document]:
    """`count` documents of the organisation, `prefix-000.pdf` the oldest, a minute apart,
    with no run: what the list shows of each is its row."""
    start = timezone.now() - timedelta(minutes=count)
    documents = []
    for n in range(count):
        document_id = uuid.uuid4()
        documents.append(
            Document(
                id=document_id,
                organisation=organisation,
                filename=f"{prefix}-{n:03d}.pdf",
                kind="pdf",
                size_bytes=1000 + n,
                sha256=hashlib.sha256(str(document_id).encode()).hexdigest(),
                storage_key=f"test/{document_id}.pdf",
                page_count=1,
            )
        )
    Document.objects.bulk_create(documents)
    # created_at is set on insert (auto_now_add): spread them out afterwards.
    for n, document in enumerate(documents):
        Document.objects.filter(id=document.id).update(created_at=start + timedelta(minutes=n))
    return documents


def document_with_text(organisation: Organisation, pages: list[str]) -> Document:
    """A document whose extracted text is `pages`, saved as the extract stage saves it."""
    document_id = uuid.uuid4()
    document = Document.objects.create(
        id=document_id,
        organisation=organisation,
        filename="pages.pdf",
        kind="pdf",
        size_bytes=1000,
        sha256=hashlib.sha256(str(document_id).encode()).hexdigest(),
        storage_key=f"test/{document_id}.pdf",
    )
    # Pages joined as extraction joins them.
    starts, offset = [], 0
    for page in pages:
        starts.append(offset)
        offset += len(page) + len(PAGE_BREAK)
    text = PAGE_BREAK.join(pages)
    extracted = Extracted(text=text, page_count=len(pages), page_starts=tuple(starts))
    document_text_save(document=document, extracted=extracted)
    document.refresh_from_db()
    return document
