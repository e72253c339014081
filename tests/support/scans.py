"""Scans of known text, made here: pages set in the Debian fonts at a size and resolution,
turned a degree or two, speckled and JPEG-compressed like a cheap office scanner's output,
as pictures and as the files people upload (image-only PDF, PNG, JPEG, multi-page TIFF).
Everything is seeded: the same name gives the same pixels. `word_f1` scores what OCR read
against the text a page was made from.
"""

import collections
import functools
import io
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from pypdf import PdfReader, PdfWriter

FONTS = Path("/usr/share/fonts/truetype")
SERIF = FONTS / "liberation" / "LiberationSerif-Regular.ttf"
SANS = FONTS / "liberation" / "LiberationSans-Regular.ttf"
SANS_BOLD = FONTS / "liberation" / "LiberationSans-Bold.ttf"
DEJAVU = FONTS / "dejavu" / "DejaVuSans.ttf"
DEJAVU_SERIF = FONTS / "dejavu" / "DejaVuSerif.ttf"
MONO = FONTS / "dejavu" / "DejaVuSansMono.ttf"

# Plain office prose: what a scanned letter, report or invoice holds.
SENTENCES = (
    "The committee met on Tuesday to review the budget for the coming year.",
    "Members agreed that the new library should open before the end of October.",
    "Please send the signed contract to our office by the fifteenth of March.",
    "The annual report shows that revenue grew by twelve percent since last spring.",
    "Our engineers replaced the old pumps and tested the water supply twice.",
    "Each invoice must state the order number, the date and the total amount due.",
    "The museum will be closed on Monday while the painters finish the main hall.",
    "Visitors are asked to park behind the station and walk along the river.",
    "A copy of this letter has been filed with the county records department.",
    "The school board approved three new teachers and a larger science room.",
    "Shipping takes five working days, and returns are accepted within a month.",
    "The survey found that most families read the local paper every weekend.",
    "Heavy rain delayed the harvest, but the farmers expect a fair price for wheat.",
    "The hospital opened a second clinic near the market square in January.",
    "All staff should complete the safety training before the summer holidays.",
    "The bridge across the valley was built in 1952 and repaired in 1987.",
    "Tenants must report any damage to the kitchen or the heating within a week.",
    "The council thanks every volunteer who helped clean the park on Saturday.",
    "Our catalogue lists more than four hundred tools, lamps and garden chairs.",
    "The orchestra will play music by Mozart and Brahms at the spring concert.",
)
TABLE = (
    ("Item", "Quantity", "Price", "Total"),
    ("Paper", "12", "4.50", "54.00"),
    ("Pencils", "40", "0.25", "10.00"),
    ("Folders", "8", "2.10", "16.80"),
    ("Stapler", "2", "7.95", "15.90"),
    ("Envelopes", "100", "0.05", "5.00"),
)
POINTS_PER_INCH = 72


@dataclass(frozen=True)
class Scan:
    name: str
    text: str  # the words on the page, in reading order
    image: Image.Image  # greyscale ("L"), as the scanner gave it
    dpi: int
    degrees: float = 0.0  # how far the scanner turned it, anticlockwise


def _font(path: Path, points: float, dpi: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(path), round(points * dpi / POINTS_PER_INCH))


def _prose(rng: random.Random, sentences: int) -> str:
    return " ".join(rng.sample(SENTENCES, sentences))


def _wrap(text: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        candidate = f"{line} {word}".strip()
        if line and font.getlength(candidate) > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    return lines + [line] if line else lines


class _Page:
    """A white page of `inches` at `dpi`, written from the top left margin down."""

    def __init__(self, inches: tuple[float, float], dpi: int):
        self.dpi = dpi
        self.image = Image.new("L", (round(inches[0] * dpi), round(inches[1] * dpi)), 255)
        self.draw = ImageDraw.Draw(self.image)
        self.margin = round(0.6 * dpi)
        self.y = self.margin
        self.lines: list[str] = []

    def paragraph(self, text: str, font: ImageFont.FreeTypeFont, *, left=None, width=None):
        left = self.margin if left is None else left
        width = self.image.width - left - self.margin if width is None else width
        step = round(font.size * 1.35)
        for line in _wrap(text, font, width):
            self.draw.text((left, self.y), line, font=font, fill=0)
            self.lines.append(line)
            self.y += step
        self.y += step // 2


def _scanned(page: Image.Image, *, seed: int, degrees: float, quality: int) -> Image.Image:
    """The page as a scanner sends it: turned by `degrees`, with paper grain and
    toner specks, through JPEG at `quality`."""
    rng = np.random.default_rng(seed)
    turned = page.rotate(degrees, resample=Image.Resampling.BICUBIC, fillcolor=255)
    pixels = np.asarray(turned, dtype=np.int16)
    pixels = pixels - rng.integers(0, 18, size=pixels.shape)  # grey paper grain
    specks = rng.random(pixels.shape) < 0.0004
    pixels[specks] = rng.integers(0, 120, size=int(specks.sum()))
    noisy = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="L")
    out = io.BytesIO()
    noisy.save(out, format="JPEG", quality=quality)
    return Image.open(io.BytesIO(out.getvalue())).convert("L")


def _letter(font_path: Path, points: float):
    """Three paragraphs of two sentences in one font and size."""

    def make(seed: int, dpi: int) -> _Page:
        rng = random.Random(seed)
        page = _Page((8.5, 5.5), dpi)
        font = _font(font_path, points, dpi)
        for _ in range(3):
            page.paragraph(_prose(rng, 2), font)
        return page

    return make


def _mixed(seed: int, dpi: int) -> _Page:
    """A heading, body text and a monospaced reference block: three fonts, three sizes."""
    rng = random.Random(seed)
    page = _Page((8.5, 5.5), dpi)
    page.paragraph("Quarterly Maintenance Notice", _font(SANS_BOLD, 18, dpi))
    page.paragraph(_prose(rng, 3), _font(DEJAVU_SERIF, 10, dpi))
    page.paragraph("Reference 4471 filed under section B", _font(MONO, 10, dpi))
    page.paragraph(_prose(rng, 2), _font(SANS, 9, dpi))
    return page


def _two_columns(seed: int, dpi: int) -> _Page:
    rng = random.Random(seed)
    page = _Page((8.5, 5.5), dpi)
    font = _font(SERIF, 11, dpi)
    gutter = round(0.4 * dpi)
    column = (page.image.width - 2 * page.margin - gutter) // 2
    top = page.y
    page.paragraph(_prose(rng, 4), font, width=column)
    page.y = top
    page.paragraph(_prose(rng, 4), font, left=page.margin + column + gutter, width=column)
    return page


def _table(dpi: int) -> _Page:
    page = _Page((8.5, 5.5), dpi)
    page.paragraph("Office supplies ordered in May", _font(SANS_BOLD, 14, dpi))
    font = _font(SANS, 11, dpi)
    cell_w, cell_h = round(1.5 * dpi), round(0.4 * dpi)
    pad = round(0.08 * dpi)
    for row_number, row in enumerate(TABLE):
        y = page.y + row_number * cell_h
        for column, cell in enumerate(row):
            x = page.margin + column * cell_w
            page.draw.rectangle((x, y, x + cell_w, y + cell_h), outline=0, width=2)
            page.draw.text((x + pad, y + pad), cell, font=font, fill=0)
        page.lines.append(" ".join(row))
    return page


# name: (how the page is made, dpi, seed, degrees turned, JPEG quality)
_SCANS = {
    "serif-300": (_letter(SERIF, 11), 300, 1, 1.5, 70),
    "sans-200": (_letter(DEJAVU, 10), 200, 2, -1.0, 60),
    "mixed-300": (_mixed, 300, 3, -2.0, 65),
    "two-columns-200": (_two_columns, 200, 4, 1.0, 60),
    "table-300": (lambda seed, dpi: _table(dpi), 300, 5, -1.2, 70),
}
NAMES = tuple(_SCANS)


@functools.cache
def make_scan(name: str) -> Scan:
    """The scan called `name` (one of NAMES), the same pixels every time (made once per
    process; do not draw on its image)."""
    make, dpi, seed, degrees, quality = _SCANS[name]
    page = make(seed, dpi)
    image = _scanned(page.image, seed=seed, degrees=degrees, quality=quality)
    return Scan(name=name, text="\n".join(page.lines), image=image, dpi=dpi, degrees=degrees)


def blank_scan(dpi: int = 200) -> Scan:
    """An empty page through the same scanner: grain and specks, no words."""
    page = _Page((8.5, 5.5), dpi)
    return Scan("blank", "", _scanned(page.image, seed=99, degrees=0.5, quality=60), dpi, 0.5)


def as_pdf(scans: list[Scan]) -> bytes:
    """An image-only PDF, a page per scan at its own resolution, as a scanner's PDF is."""
    writer = PdfWriter()
    for scan in scans:
        page = io.BytesIO()
        scan.image.copy().save(page, format="PDF", resolution=scan.dpi)  # saving marks it
        writer.append(PdfReader(page))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def as_png(scan: Scan) -> bytes:
    out = io.BytesIO()
    scan.image.copy().save(out, format="PNG", dpi=(scan.dpi, scan.dpi))
    return out.getvalue()


def as_jpeg(scan: Scan) -> bytes:
    out = io.BytesIO()
    scan.image.copy().save(out, format="JPEG", quality=85, dpi=(scan.dpi, scan.dpi))
    return out.getvalue()


def as_tiff(scans: list[Scan]) -> bytes:
    """A multi-page TIFF, one page per scan, as fax and archive scanners write them."""
    out = io.BytesIO()
    first, *rest = [scan.image.copy() for scan in scans]  # saving marks the image saved
    first.save(
        out,
        format="TIFF",
        compression="tiff_deflate",
        dpi=(scans[0].dpi,) * 2,
        save_all=True,
        append_images=rest,
    )
    return out.getvalue()


_WORD = re.compile(r"\w+")  # one class, no alternation: linear on any text


def words(text: str) -> collections.Counter:
    """The bag of lowercased words in `text`, punctuation left out."""
    return collections.Counter(_WORD.findall(text.lower()))


def word_f1(expected: str, got: str) -> float:
    """Word F1 of `got` against `expected`, as bags of lowercased words (1.0 when both
    are empty)."""
    want, found = words(expected), words(got)
    if not want and not found:
        return 1.0
    overlap = sum((want & found).values())
    return 2 * overlap / (sum(want.values()) + sum(found.values()))
