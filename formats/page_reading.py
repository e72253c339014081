"""A page without text read by OCR: drawn (formats/render.py) in greyscale, then read by
the OCR engine (formats/ocr.py). What the OCR stage runs in its isolated child, one page
a call, so that a page that crashes or outlasts its limits costs only that page."""

from typing import BinaryIO

from formats.ocr import OcrPage, ocr_page
from formats.render import draw_page


def read_page(
    kind: str,
    index: int,
    *,
    dpi: float,
    max_pixels: int,
    languages: tuple[str, ...],
    file: BinaryIO,
    progress=None,
) -> OcrPage:
    """Page `index` (from 0) of the document of `kind` in `file`, read by OCR at `dpi`
    (fewer pixels than `max_pixels`) in `languages`."""
    picture = draw_page(kind, file, index, dpi=dpi, max_pixels=max_pixels, grey=True)
    return ocr_page(picture, languages=languages)
