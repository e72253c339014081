"""The Word files saved by real Word (tests/support/real_world.py) read word for word as
they did before parts were found through the package's relationships (issue 40): each
file's extracted text, pages charged and pages held at accept, pinned. The digests were
computed from the reader as it was before that change."""

import hashlib
import io

import pytest

from documents.reading import accept_limits
from formats import docx
from formats.base import Deadline
from tests.support.real_world import DOCUMENTS

# name: (SHA-256 of the extracted text, pages charged, pages held at accept)
PINNED = {
    "comments-rich-para.docx": (
        "389b3506a5ce73a50c9d026e39e4ae1415e68904dd05bfde9a0a4bdfd6eec751",
        1,
        1,
    ),
    "doc-word-default-blank.docx": (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        1,
        1,
    ),
    "having-images.docx": (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        1,
        1,
    ),
    "hdr-header-footer.docx": (
        "e21b5d725ea81c32c1415aeddf727f9e45f254b3f71f3eb3ad7827bc09e6a16c",
        2,
        2,
    ),
    "par-hyperlinks.docx": (
        "222354e97bbac4db5b638b280b6b2397ad70b294809c35004410febe756ad233",
        1,
        1,
    ),
    "sct-first-page-hdrftr.docx": (
        "2efb32a875a03597d7a0651023d2db17f50c86290f924a1806251f1ef2072f81",
        6,
        6,
    ),
    "tbl-cell-access.docx": (
        "e23fd3911c1b97c253bf8ec067aad66f7a69a1c0ca32285c0ed6d88691c288a7",
        1,
        1,
    ),
    "tbl-having-applied-style.docx": (
        "39a7bd86203da7c9b6482deed2100fad5e863e41202f01db025fa5d82755da17",
        1,
        1,
    ),
    "txt-font-props.docx": (
        "0b7cf3dc72609a6ccf78b5a012c264d76a54d38bd1f571630abd9ed56302ce26",
        1,
        1,
    ),
}
WORD_FILES = [document for document in DOCUMENTS if document.name.endswith(".docx")]


def test_every_real_word_file_is_pinned():
    assert sorted(document.name for document in WORD_FILES) == sorted(PINNED)


@pytest.mark.parametrize("document", WORD_FILES, ids=lambda document: document.name)
def test_a_real_word_file_reads_as_it_did_before_parts_were_found_by_relationship(document, limits):
    digest, pages, held = PINNED[document.name]

    extracted = docx.extract(document.data, limits=limits)
    inspection = docx.inspect(
        io.BytesIO(document.data), limits=accept_limits(), deadline=Deadline(30)
    )

    assert hashlib.sha256(extracted.text.encode()).hexdigest() == digest
    assert (extracted.page_count, inspection.pages) == (pages, held)
