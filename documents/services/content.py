"""A document's content as the pipeline produces it: extracted text, page count, chunks."""

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from django.db import connection, transaction
from django.db.models.functions import MD5
from django.utils import timezone

from core.cjk import with_bigrams
from core.selects import RowSelect
from documents.models import FLOAT32_BYTES, Chunk, Document, DocumentText, PageReading
from documents.services.vocabulary import vocabulary_change, vocabulary_leave
from formats.base import PAGE_BREAK, Extracted, clean_extracted

# Settling a version (every document's): its chunks counted and it made the searchable one
# in one statement written once, where the ORM would build two querysets.
_SEARCHABLE = (
    f"UPDATE {Document._meta.db_table} SET searchable_version = %s, chunk_count = "
    f"(SELECT count(*) FROM {Chunk._meta.db_table} WHERE document_id = %s AND version = %s) "
    "WHERE id = %s RETURNING chunk_count"
)
_TEXT = RowSelect(DocumentText, where="t.document_id = %s AND t.version = %s")

# The longest section title a chunk keeps (Chunk.section).
SECTION_CHARS = Chunk._meta.get_field("section").max_length


def document_text_save(*, document: Document, extracted: Extracted) -> None:
    """Keep the extracted text of the document's current version with its page offsets
    and outline, its real page count, the pages that could not be read or hold no text,
    and what read it (one upsert: a retry overwrites what an earlier try saved)."""
    outline = [heading.as_json() for heading in extracted.outline]
    DocumentText.objects.bulk_create(
        [
            DocumentText(
                document=document,
                version=document.version,
                text=extracted.text,
                page_count=extracted.page_count,
                page_starts=list(extracted.page_starts),
                outline=outline,
            )
        ],
        update_conflicts=True,
        unique_fields=["document", "version"],
        update_fields=["text", "page_count", "page_starts", "outline"],
    )
    Document.objects.filter(id=document.id).update(
        page_count=extracted.page_count,
        text_chars=len(extracted.text),
        unreadable_pages=list(extracted.unreadable_pages),
        textless_pages=list(extracted.textless_pages),
        ocr_pages=[],
        text_engine=extracted.engine,
    )


def document_text_add_readings(*, document: Document) -> None:
    """Put the text OCR read on the pages of the document's current version that held
    none in their places in its text (cleaned as extracted text is); keep as textless
    the pages OCR found nothing on, and count as unreadable those it could not read
    (their PageReading says why)."""
    stored = DocumentText.objects.get(document=document, version=document.version)
    readings = {
        reading.page: reading
        for reading in PageReading.objects.filter(document=document, version=document.version)
    }
    starts = list(stored.page_starts)
    ends = [start - len(PAGE_BREAK) for start in starts[1:]] + [len(stored.text)]
    pages = [stored.text[start:end] for start, end in zip(starts, ends, strict=True)]
    for number, reading in readings.items():
        if 1 <= number <= len(pages) and not pages[number - 1].strip():
            pages[number - 1] = clean_extracted(reading.text).strip()
    stored.text = PAGE_BREAK.join(pages)
    breaks = (len(page) + len(PAGE_BREAK) for page in pages[:-1])
    stored.page_starts = list(accumulate(breaks, initial=0))
    stored.save(update_fields=["text", "page_starts"])
    failed = {number for number, reading in readings.items() if reading.problem}
    unreadable = Document.objects.values_list("unreadable_pages", flat=True).get(id=document.id)
    Document.objects.filter(id=document.id).update(
        text_chars=len(stored.text),
        textless_pages=[
            n for n, page in enumerate(pages, start=1) if not page.strip() and n not in failed
        ],
        unreadable_pages=sorted(set(unreadable or ()) | failed),
        ocr_pages=[
            {"page": number, "confidence": round(reading.confidence, 3)}
            for number, reading in sorted(readings.items())
            if not reading.problem and reading.text.strip()
        ],
    )


def document_text_get(*, document: Document) -> DocumentText | None:
    return _TEXT.first([document.id, document.version])


@dataclass(frozen=True)
class ChunkPlace:
    """Where a chunk's text comes from: its first and last page (from 1; None where the
    format has no pages) and the title of the section it starts in ("" for none)."""

    page_start: int | None = None
    page_end: int | None = None
    section: str = ""


def document_chunks_upsert(
    *,
    document: Document,
    start: int,
    texts: Sequence[str],
    vectors: Sequence[bytes],
    model: str,
    places: Sequence[ChunkPlace] | None = None,
) -> list:
    """Write chunks `start`, `start + 1`, … of the current version under their stable ids,
    with the model that embedded them, how many numbers each vector holds (from its float32
    bytes) and where each comes from in the document (`places`, one a chunk; unknown when
    not given); writing the same positions again overwrites them. Returns their ids."""
    places = places if places is not None else [ChunkPlace()] * len(texts)
    now = timezone.now()
    chunks = [
        Chunk(
            id=Chunk.stable_id(document_id=document.id, version=document.version, index=i),
            document=document,
            version=document.version,
            index=i,
            text=text,
            search_text=with_bigrams(text),
            embedding=vector,
            embedding_model=model,
            embedding_dimensions=len(vector) // FLOAT32_BYTES,
            page_start=place.page_start,
            page_end=place.page_end,
            section=place.section[:SECTION_CHARS],
            created_at=now,
        )
        for i, (text, vector, place) in enumerate(
            zip(texts, vectors, places, strict=True), start=start
        )
    ]
    Chunk.objects.bulk_create(
        chunks,
        update_conflicts=True,
        unique_fields=["id"],
        update_fields=[
            "text",
            "search_text",
            "embedding",
            "embedding_model",
            "embedding_dimensions",
            "page_start",
            "page_end",
            "section",
        ],
    )
    return [chunk.id for chunk in chunks]


def document_chunks_on_model(*, document: Document, model: str) -> dict[int, str]:
    """The current version's chunks whose vectors `model` made: index -> MD5 of the text
    (hex). The embed stage leaves those whose text is unchanged alone."""
    return dict(
        Chunk.objects.filter(document=document, version=document.version, embedding_model=model)
        .annotate(digest=MD5("text"))
        .values_list("index", "digest")
    )


@transaction.atomic(savepoint=False)
def document_chunks_finish(*, document: Document, count: int) -> None:
    """The current version has `count` chunks: drop any beyond them (from an earlier,
    longer try). They are not searchable yet: `document_make_searchable` makes them so
    when the run settles, and only then are earlier versions' chunks dropped. Inside a
    transaction it joins it without a savepoint; its errors end it."""
    Chunk.objects.filter(document=document, version=document.version, index__gte=count).delete()


@transaction.atomic(savepoint=False)
def document_make_searchable(*, document: Document) -> int:
    """Search reads the document's current version from now on (its run settles, in the
    settle's transaction): its chunk count is recorded, its words replace the superseded
    version's in the organisation's vocabulary, and the chunks of every other version
    (the one it supersedes) are dropped. Returns the chunk count."""
    version = document.version
    vocabulary_change(document_id=document.id, version=version)
    if version > 1:  # a first version supersedes none
        Chunk.objects.filter(document=document).exclude(version=version).delete()
    with connection.cursor() as cursor:
        cursor.execute(_SEARCHABLE, [version, document.id, version, document.id])
        (count,) = cursor.fetchone()
    document.searchable_version, document.chunk_count = version, count
    return count


def document_chunks_discard_unsettled(*, document_id) -> int:
    """Remove the chunks of the document that search does not read (of a version whose
    run never settled): the run that wrote them ended without success. The searchable
    version's chunks stay. Returns how many went."""
    searchable = (
        Document.objects.filter(id=document_id).values_list("searchable_version", flat=True).first()
    )
    chunks = Chunk.objects.filter(document_id=document_id)
    if searchable is not None:
        chunks = chunks.exclude(version=searchable)
    deleted, _ = chunks.delete()
    return deleted


@transaction.atomic
def document_mark_source_deleted(*, document_ids: Sequence, remove_chunks: bool) -> int:
    """Documents whose connected file was deleted at its source: marked so, and (when
    `remove_chunks`) taken out of search. Returns how many were newly marked."""
    marked = Document.objects.filter(id__in=document_ids, source_deleted_at__isnull=True).update(
        source_deleted_at=timezone.now()
    )
    if remove_chunks:
        vocabulary_leave(document_ids=document_ids)
        Chunk.objects.filter(document_id__in=document_ids).delete()
        Document.objects.filter(id__in=document_ids).update(searchable_version=None, chunk_count=0)
    return marked


def document_has_chunks(*, document: Document) -> bool:
    """Whether the document's current version is searchable: settled, with chunks."""
    return (
        document.searchable_version == document.version
        and Chunk.objects.filter(document=document, version=document.version).exists()
    )


def document_mark_source_restored(*, document_ids: Sequence) -> None:
    """The connected file is back (restored at its source): no longer marked deleted."""
    Document.objects.filter(id__in=document_ids).update(source_deleted_at=None)


def document_rename(*, document_id, filename: str) -> None:
    """The connected file goes by a new name (moved or renamed at its source)."""
    Document.objects.filter(id=document_id).update(filename=filename, updated_at=timezone.now())
