"""The embed stage: each chunk it stores knows its first and last page, the section it
starts in and its vector's dimensions, from real files run through the stages."""

import io
import re

import docx
import pytest

from documents.models import Chunk
from retrieval.embedding import get_embedder
from tests.support.files import make_pdf, with_outline
from tests.support.real_world import FOLDER
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


def _chunks(run) -> list[Chunk]:
    return list(Chunk.objects.filter(document=run.document_id).order_by("index"))


def test_a_labelled_pdfs_chunks_know_their_pages_sections_and_dimensions(api):
    pdf = make_pdf(6, words_per_page=300, label="Harbour page")
    pdf = with_outline(pdf, [("Part one", 1), ("Part two", 4)])

    run = drive(accepted_run(api, pdf).id)

    assert run.status == "succeeded"
    chunks = _chunks(run)
    assert len(chunks) > 6
    [dimensions] = {len(vector) for vector in get_embedder().embed(["harbour"])}
    covered = set()
    for chunk in chunks:
        assert 1 <= chunk.page_start <= chunk.page_end <= 6
        # A page's label is on the page the chunk says it covers.
        for label in re.findall(r"Harbour page (\d)", chunk.text):
            assert chunk.page_start <= int(label) <= chunk.page_end, chunk.text[:80]
        assert chunk.section == ("Part two" if chunk.page_start >= 4 else "Part one")
        assert chunk.embedding_dimensions == dimensions == len(bytes(chunk.embedding)) // 4
        covered.update(range(chunk.page_start, chunk.page_end + 1))
    assert covered == set(range(1, 7))
    assert any(chunk.page_start < chunk.page_end for chunk in chunks)  # across a page break


# badlin1.pdf (30 pages, page N reads "Potato N-1") has an outline out of page order,
# nested four deep: the section of a page is the entry with the latest page at or before
# it, the later one in the outline where two share a page.
BADLIN_SECTIONS = [
    (1, "Trepsicle 1.2.2"),
    (2, "Trepsichord 1.2.1"),
    (6, "Isís 1"),
    (12, "Amanda 1.1"),
    (13, "Isosicle 1.1.2 "),
    (14, "Sandy"),
    (16, "Trepak 2"),
    (19, "Isosicle 1.1.1.1"),
    (20, "Isosicle 1.1.1.2"),
    (23, "Isosicle 1.1.2.1"),
]


def _badlin_section(page: int) -> str:
    return [title for first, title in BADLIN_SECTIONS if first <= page][-1]


def test_a_real_pdfs_outline_gives_each_chunk_its_section(api, settings, monkeypatch):
    settings.PAPERLANE_CHUNK_CHARS = 30
    monkeypatch.setattr("retrieval.chunking.OVERLAP_CHARS", 12)

    run = drive(accepted_run(api, (FOLDER / "badlin1.pdf").read_bytes(), "badlin1.pdf").id)

    assert run.status == "succeeded"
    chunks = _chunks(run)
    assert len(chunks) >= 15
    for chunk in chunks:
        pages = [int(n) + 1 for n in re.findall(r"Potato (\d+)", chunk.text)]
        assert (chunk.page_start, chunk.page_end) == (min(pages), max(pages)), chunk.text
        assert chunk.section.startswith(_badlin_section(chunk.page_start)), (
            chunk.page_start,
            chunk.section,
        )
    assert {c.page_start for c in chunks} >= {1, 13, 24}
    assert chunks[-1].page_end == 30


def _docx_with_headings() -> bytes:
    """A Word document as python-docx writes one from Word's own template: headings in
    the built-in styles, a style based on one of them, a paragraph given an outline level
    of its own, and a Title (not a heading)."""
    document = docx.Document()
    document.add_paragraph("Field notes", style="Title")
    document.add_paragraph("opening remarks " * 40)
    document.add_heading("Tides and currents", level=1)
    document.add_paragraph("tidal observations " * 60)
    document.add_heading("Neap tides", level=2)
    document.add_paragraph("neap measurements " * 60)
    based = document.styles.add_style("Site heading", docx.enum.style.WD_STYLE_TYPE.PARAGRAPH)
    based.base_style = document.styles["Heading 1"]
    document.add_paragraph("Harbour sites", style="Site heading")
    document.add_paragraph("harbour survey " * 60)
    own = document.add_paragraph("Appendix of soundings")
    level = own._p.get_or_add_pPr()._add_outlineLvl()
    level.set(docx.oxml.ns.qn("w:val"), "0")
    document.add_paragraph("sounding table " * 60)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_word_documents_chunks_are_in_the_section_of_its_headings_without_pages(
    api, settings, monkeypatch
):
    settings.PAPERLANE_CHUNK_CHARS = 400
    monkeypatch.setattr("retrieval.chunking.OVERLAP_CHARS", 60)

    run = drive(accepted_run(api, _docx_with_headings(), "notes.docx").id)

    assert run.status == "succeeded"
    chunks = _chunks(run)
    sections = {
        "opening": "",
        "tidal": "Tides and currents",
        "neap": "Neap tides",
        "harbour": "Harbour sites",
        "sounding": "Appendix of soundings",
    }
    seen = set()
    for chunk in chunks:
        assert chunk.page_start is None and chunk.page_end is None
        first = chunk.text.split()[0]
        if first in sections:  # it starts inside a paragraph: in that paragraph's section
            assert chunk.section == sections[first], (chunk.section, chunk.text[:60])
        seen.add(chunk.section)
    assert seen == set(sections.values())


def test_a_real_word_document_without_headings_has_chunks_in_no_section(api):
    data = (FOLDER / "hdr-header-footer.docx").read_bytes()

    run = drive(accepted_run(api, data, "hdr-header-footer.docx").id)

    assert run.status == "succeeded"
    chunks = _chunks(run)
    assert chunks
    assert all((c.page_start, c.page_end, c.section) == (None, None, "") for c in chunks)
    assert all(c.embedding_dimensions for c in chunks)
