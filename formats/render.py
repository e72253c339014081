"""Pages as pictures: a PDF page rendered by PDFium, a picture's frame turned upright,
for the previews people see and for the pages OCR reads. Like the other format modules
it reads no settings and imports no Django: the caller gives the size, and runs it in
the isolated child (core.isolation) for what it cannot trust.
"""

import io
import math
from dataclasses import dataclass
from typing import BinaryIO

import pypdfium2 as pdfium
from PIL import Image

from core.errors import UnreadableDocument
from formats import image

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
    data: bytes | BinaryIO,
    index: int,
    *,
    dpi: float,
    limits: RenderLimits,
    grey: bool = False,
    width: int | None = None,
) -> Image.Image:
    """Page `index` (from 0) of the PDF `data` (its bytes, or a file PDFium reads as it
    needs) at `dpi` (less if that passes `limits.max_pixels`, or makes it wider than
    `width` pixels when given), as an RGB picture, or greyscale with `grey` (what OCR
    reads), its `info["dpi"]` the resolution it was drawn at. UnreadableDocument if the
    file or the page cannot be opened."""
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
            points_wide, points_high = page.get_size()
            if width is not None:
                dpi = min(dpi, width * POINTS_PER_INCH / max(points_wide, 1))
            scale = _scale(points_wide, points_high, dpi=dpi, max_pixels=limits.max_pixels)
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


# What a picture may be encoded as, and the quality asked of the lossy ones (WebP and
# JPEG at 80 keep small print legible; see docs/benchmarks.md, bench/pictures.py).
PICTURE_FORMATS = {"webp": "WEBP", "jpeg": "JPEG", "png": "PNG"}
PICTURE_QUALITY = 80


def picture_encode(picture: Image.Image, image_format: str) -> bytes:
    """`picture` as the bytes of a file of `image_format` (a key of PICTURE_FORMATS)."""
    out = io.BytesIO()
    options = {"quality": PICTURE_QUALITY} if image_format != "png" else {}
    picture.save(out, PICTURE_FORMATS[image_format], **options)
    return out.getvalue()


def draw_page(
    kind: str,
    file: BinaryIO,
    index: int,
    *,
    dpi: float,
    max_pixels: int,
    grey: bool = False,
    width: int | None = None,
) -> Image.Image:
    """Page `index` (from 0) of the document of `kind` in `file` as a picture: a PDF's
    page drawn by PDFium (render_pdf_page), a picture's frame as it is, upright
    (formats.image.render_image_page); at `dpi` or fewer, never more than `max_pixels`,
    at most `width` wide when given; greyscale with `grey`."""
    if kind in image.KINDS:
        return image.render_image_page(
            file, kind, index, dpi=dpi, max_pixels=max_pixels, grey=grey, width=width
        )
    limits = RenderLimits(max_pixels=max_pixels)
    return render_pdf_page(file, index, dpi=dpi, limits=limits, grey=grey, width=width)


def page_picture(
    kind: str,
    index: int,
    *,
    dpi: float,
    width: int | None,
    max_pixels: int,
    image_format: str,
    file: BinaryIO,
    progress=None,
) -> bytes:
    """Page `index` (from 0) of the document of `kind` in `file`, drawn by draw_page and
    encoded as `image_format`: what a person sees of a page. Called in the isolated child
    (documents.pictures), which passes `file` and `progress`."""
    picture = draw_page(kind, file, index, dpi=dpi, max_pixels=max_pixels, width=width)
    return picture_encode(picture, image_format)
