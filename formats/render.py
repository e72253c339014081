"""Pages as pictures: a PDF page rendered by PDFium, for the previews people see and for
the pages OCR reads. Like the other format modules it reads no settings and imports no
Django: the caller gives the size, and runs it in the isolated child (core.isolation)
for what it cannot trust.
"""

import math
from dataclasses import dataclass
from typing import BinaryIO

import pypdfium2 as pdfium
from PIL import Image

from core.errors import UnreadableDocument

# A PDF's user space is 72 units to the inch.
POINTS_PER_INCH = 72


@dataclass(frozen=True)
class RenderLimits:
    # The most pixels one rendered page may have (width x height): a page that states a
    # huge media box is drawn smaller, never bigger than this.
    max_pixels: int


def _scale(width: float, height: float, *, dpi: float, max_pixels: int) -> float:
    """Pixels per point for `dpi`, or fewer, so that the page (PDFium rounds its sides
    up) has at most `max_pixels`."""
    scale = dpi / POINTS_PER_INCH
    pixels = math.ceil(max(width * scale, 1)) * math.ceil(max(height * scale, 1))
    if pixels > max_pixels:
        scale *= (max_pixels / pixels) ** 0.5
        while math.ceil(max(width * scale, 1)) * math.ceil(max(height * scale, 1)) > max_pixels:
            scale *= 0.99
    return scale


def render_pdf_page(
    data: bytes | BinaryIO, index: int, *, dpi: float, limits: RenderLimits, grey: bool = False
) -> Image.Image:
    """Page `index` (from 0) of the PDF `data` (its bytes, or a file PDFium reads as it
    needs) at `dpi` (less if that passes `limits.max_pixels`), as an RGB picture, or
    greyscale with `grey` (what OCR reads), its `info["dpi"]` the resolution it was drawn
    at.
    UnreadableDocument if the file or the page cannot be opened."""
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise UnreadableDocument(
            "The PDF could not be opened to draw its pages.", code="damaged_pdf"
        ) from exc
    try:
        if not 0 <= index < len(document):
            raise UnreadableDocument(f"The PDF has no page {index + 1}.", code="no_such_page")
        page = document[index]
        try:
            width, height = page.get_size()
            scale = _scale(width, height, dpi=dpi, max_pixels=limits.max_pixels)
            bitmap = page.render(scale=scale, grayscale=grey, may_draw_forms=True)
            try:
                picture = bitmap.to_pil()
            finally:
                bitmap.close()
        finally:
            page.close()
    finally:
        document.close()
    picture = picture.convert("L" if grey else "RGB")
    # The resolution it was drawn at (less than asked if the limit shrank it): OCR needs it.
    picture.info["dpi"] = (scale * POINTS_PER_INCH,) * 2
    return picture
