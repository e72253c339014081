"""The burst's documents: PDFs and DOCX files of 1 to 300 pages, all different,
written once to a scratch directory and read back as they are sent.

Sizes: 45% small (1 to 5 pages), 35% medium (6 to 99), 20% large (100 to 300);
70% PDF, 30% DOCX. Half of the DOCX files keep the app.xml python-docx writes
(it says 1 page, so accept holds 1 page and extraction charges the real
count); the other half have no page properties, so accept estimates from the
words. Every file carries its own number and random words, so no two are equal.
"""

import io
import random
from dataclasses import dataclass
from pathlib import Path

from docx import Document as DocxDocument

from documents.reading import DOCX_WORDS_PER_PAGE
from tests.support.files import _set_app_pages, make_pdf

SMALL_MAX_PAGES = 5
LARGE_MIN_PAGES = 100
MAX_PAGES = 300


@dataclass(frozen=True)
class Upload:
    number: int
    organisation: str
    kind: str  # "pdf" or "docx"
    pages: int  # the pages the file really has
    path: Path

    @property
    def filename(self) -> str:
        return f"burst-{self.number:04d}.{self.kind}"

    @property
    def size_class(self) -> str:
        if self.pages <= SMALL_MAX_PAGES:
            return "small"
        return "large" if self.pages >= LARGE_MIN_PAGES else "medium"


def _pages(rng: random.Random) -> int:
    draw = rng.random()
    if draw < 0.45:
        return rng.randint(1, SMALL_MAX_PAGES)
    if draw < 0.80:
        return rng.randint(SMALL_MAX_PAGES + 1, LARGE_MIN_PAGES - 1)
    return rng.randint(LARGE_MIN_PAGES, MAX_PAGES)


def _words(rng: random.Random, count: int) -> list[str]:
    syllables = ["pa", "per", "la", "ne", "do", "cu", "ment", "ri", "ver", "sto", "ne", "ka"]
    return ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(count)]


def _docx(number: int, pages: int, rng: random.Random, *, stated: bool) -> bytes:
    document = DocxDocument()
    vocabulary = _words(rng, 200)
    for page in range(pages):
        words = rng.choices(vocabulary, k=DOCX_WORDS_PER_PAGE - 4)
        document.add_paragraph(f"Burst {number} part {page + 1}. " + " ".join(words))
    buffer = io.BytesIO()
    document.save(buffer)
    data = buffer.getvalue()
    # python-docx states 1 page; without the statement accept estimates from the words.
    return data if stated else _set_app_pages(data, None)


def build_corpus(
    count: int, organisations: list[str], directory: Path, *, seed: int = 9
) -> list[Upload]:
    """`count` documents, dealt to `organisations` in turn, written under `directory`."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    uploads = []
    for number in range(count):
        pages = _pages(rng)
        kind = "docx" if rng.random() < 0.30 else "pdf"
        if kind == "pdf":
            label = f"Burst {number} {' '.join(_words(rng, 3))} page"
            data = make_pdf(pages, words_per_page=rng.randint(40, 120), label=label)
        else:
            data = _docx(number, pages, rng, stated=rng.random() < 0.5)
        upload = Upload(
            number=number,
            organisation=organisations[number % len(organisations)],
            kind=kind,
            pages=pages,
            path=directory / f"burst-{number:04d}.{kind}",
        )
        upload.path.write_bytes(data)
        uploads.append(upload)
    return uploads
