import uuid

import pytest

from documents.models import Chunk
from jobs.embedding import HashingEmbedder, pack_vector, unpack_vector
from jobs.text import UnreadableInput, clean_text, extract_docx, extract_pdf, split_chunks
from tests.support.files import make_damaged_pdf, make_docx, make_encrypted_pdf, make_pdf


def test_pdf_extraction_reads_every_page_and_counts_them():
    seen = []

    extracted = extract_pdf(make_pdf(5), on_page=lambda done, total: seen.append((done, total)))

    assert extracted.page_count == 5
    assert all(f"Page {n}" in extracted.text for n in range(1, 6))
    assert seen[-1] == (5, 5)


def test_an_encrypted_pdf_is_unreadable_with_a_plain_reason():
    with pytest.raises(UnreadableInput, match="password"):
        extract_pdf(make_encrypted_pdf())


def test_a_pdf_with_a_broken_page_tree_is_unreadable():
    with pytest.raises(UnreadableInput, match="damaged"):
        extract_pdf(make_damaged_pdf(3))


def test_docx_extraction_uses_the_saved_page_count():
    extracted = extract_docx(make_docx(4, pages_property=3))

    assert extracted.page_count == 3
    assert extracted.text.startswith("Paragraph 1.")


def test_docx_garbage_is_unreadable():
    with pytest.raises(UnreadableInput):
        extract_docx(b"PK\x03\x04 not really a zip")


def test_cleaning_normalises_spacing_and_mends_broken_words():
    raw = "Docu-\nment\x00  with\t\tgaps\r\n\r\n\r\nand\u00a0more  "

    assert clean_text(raw) == "Document with gaps\n\nand more"


def test_chunks_cover_the_text_within_the_size_with_overlap():
    text = " ".join(f"Sentence number {n} is here." for n in range(400))

    chunks = split_chunks(text, size=500, overlap=100)

    assert all(len(c) <= 500 for c in chunks)
    assert chunks[0].startswith("Sentence number 0 ")
    assert chunks[-1].endswith("Sentence number 399 is here.")
    for earlier, later in zip(chunks, chunks[1:], strict=False):
        assert earlier.endswith(".")
        assert later[:20] in earlier  # the overlap repeats the end of the previous chunk
    assert split_chunks("") == []


def test_the_local_embedder_is_deterministic_and_normalised():
    embedder = HashingEmbedder(dimensions=64)

    first, again, other = embedder.embed(
        ["quarterly revenue rose", "quarterly revenue rose", "the cat sat on the mat"]
    )

    assert first == again
    assert first != other
    assert sum(x * x for x in first) == pytest.approx(1.0)
    similar = embedder.embed(["quarterly revenue rose sharply"])[0]
    assert sum(a * b for a, b in zip(first, similar, strict=True)) > sum(
        a * b for a, b in zip(first, other, strict=True)
    )


def test_vectors_round_trip_through_their_stored_bytes():
    vector = HashingEmbedder(dimensions=16).embed(["hello world"])[0]

    assert unpack_vector(pack_vector(vector)) == pytest.approx(vector)
    assert len(pack_vector(vector)) == 16 * 4


def test_chunk_ids_are_stable_per_document_version_and_index():
    document = uuid.uuid4()
    a = Chunk.stable_id(document_id=document, version=1, index=3)

    assert a == Chunk.stable_id(document_id=document, version=1, index=3)
    assert a != Chunk.stable_id(document_id=document, version=2, index=3)
    assert a != Chunk.stable_id(document_id=document, version=1, index=4)


def test_a_timeout_during_extraction_is_not_mistaken_for_damage(monkeypatch):
    from pypdf import PageObject
    from rq.timeouts import JobTimeoutException

    def slow(self, *args, **kwargs):
        raise JobTimeoutException("took too long")

    monkeypatch.setattr(PageObject, "extract_text", slow)

    with pytest.raises(JobTimeoutException):
        extract_pdf(make_pdf(2))


def test_more_pages_than_allowed_is_unreadable_even_if_the_file_claimed_fewer(settings):
    settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 3

    with pytest.raises(UnreadableInput, match="the most we accept is 3"):
        extract_pdf(make_pdf(5))
