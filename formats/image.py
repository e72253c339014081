"""Pictures of paper as documents: PNG, JPEG and TIFF (a multi-page TIFF is one page a
frame), recognised by their bytes like PDFs. They hold no text: every page is read by
OCR (pipeline/stages/ocr.py) and shown as itself.

A page is what a person would photograph or scan, so the pixels a frame may have are
bounded (MAX_PIXELS) and checked from each frame's header, before a pixel is decoded:
a small file that states a huge picture (a decompression bomb) is refused at accept,
within the accept budget, and again by extraction, which counts the frames from the
file itself. A PNG or JPEG is one page whatever it holds besides (an animated PNG's
frames, a JPEG's preview pictures are not pages). The picture is turned as its EXIF
orientation says before anyone sees or reads it.

Like the other format modules it reads no settings and imports no Django.
"""

import struct
import warnings
from typing import BinaryIO

from PIL import Image, UnidentifiedImageError

from core.errors import UnreadableDocument
from formats.base import (
    JPEG,
    PAGE_BREAK,
    PNG,
    TIFF,
    AcceptLimits,
    Deadline,
    Extracted,
    ExtractLimits,
    Inspection,
    check_page_budget,
)

KINDS = (PNG, JPEG, TIFF)
# The first bytes of each kind (TIFF in either byte order; BigTIFF is not read).
_SIGNATURES = {
    PNG: (b"\x89PNG\r\n\x1a\n",),
    JPEG: (b"\xff\xd8\xff",),
    TIFF: (b"II*\x00", b"MM\x00*"),
}
# What Pillow calls each: the only decoder it may try on the file.
_PILLOW_FORMATS = {PNG: "PNG", JPEG: "JPEG", TIFF: "TIFF"}
# The most pixels a page may have: a page of A3 scanned at 600 dpi (70 million) is over,
# a 50-megapixel photograph or an A4 page at 600 dpi (35 million) within. Decoded in
# colour it takes 4 bytes a pixel, 240 MB at most.
MAX_PIXELS = 60_000_000
# A picture's stated resolution is believed when the page it makes is paper-sized (its
# longer side at most this many inches): a camera's 72 dpi on a 4000-pixel photograph
# would make it 55 inches wide.
MAX_PAGE_INCHES = 17


def kind_of(head: bytes) -> str | None:
    """PNG, JPEG or TIFF when `head` (the file's first bytes) starts like one, else None."""
    for kind, signatures in _SIGNATURES.items():
        if head.startswith(signatures):
            return kind
    return None


def _damaged(kind: str) -> UnreadableDocument:
    return UnreadableDocument(
        f"The {kind.upper()} picture could not be read; the file may be damaged or cut "
        "short. Saving it again from its application may help.",
        code="damaged_image",
    )


def _too_large(page: int, width: int | None = None, height: int | None = None):
    where = f"Page {page} of the picture" if page > 1 else "The picture"
    most = f"the most we accept for a page is {MAX_PIXELS / 1e6:.0f} million pixels"
    if width is None or height is None:
        said = f"has more pixels than we accept: {most}"
    else:
        said = f"is {width} × {height} pixels ({width * height / 1e6:.0f} million); {most}"
    return UnreadableDocument(
        f"{where} {said}. A page scanned at 300 dpi is well within it.",
        code="image_too_large",
    )


def _too_many_pages(limit: int) -> UnreadableDocument:
    return UnreadableDocument(
        f"The picture has more than {limit} pages; the most we accept is {limit}.",
        code="too_many_pages",
    )


def _open(stream: BinaryIO, kind: str) -> Image.Image:
    """The picture in `stream`, its header read and not a pixel decoded."""
    stream.seek(0)
    try:
        with warnings.catch_warnings():
            # Pillow warns of, and past twice its own bound refuses, a picture larger than
            # it likes: ours (MAX_PIXELS) is lower, and is checked on every frame.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return Image.open(stream, formats=[_PILLOW_FORMATS[kind]])
    except Image.DecompressionBombError:
        raise _too_large(1) from None
    except _DECODE_ERRORS as exc:
        raise _damaged(kind) from exc


# What Pillow raises for a file it cannot make sense of.
_DECODE_ERRORS = (UnidentifiedImageError, OSError, ValueError, SyntaxError, struct.error)


def _check_size(image: Image.Image, page: int) -> None:
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise _too_large(page, width, height)


def _pages(
    image: Image.Image, stream: BinaryIO, kind: str, *, max_pages: int, deadline: Deadline | None
) -> int:
    """The pages of the opened picture (a TIFF's frames, else 1), each frame's stated size
    checked against MAX_PIXELS: UnreadableDocument for one over it, or for more frames
    than `max_pages`."""
    _check_size(image, 1)
    if kind != TIFF:
        return 1
    return _tiff_frames(stream, max_pages=max_pages, deadline=deadline)


# A TIFF's frames are a chain of directories (IFDs): a count of 12-byte entries, the
# entries, then where the next one starts (0 after the last).
_IFD_ENTRY = 12
_WIDTH, _LENGTH = 256, 257
_SHORT, _LONG = 3, 4
# Frames counted between looks at the deadline.
_FRAMES_PER_CHECK = 64


def _tiff_frames(stream: BinaryIO, *, max_pages: int, deadline: Deadline | None) -> int:
    """A TIFF's frames, counted by walking its directories (Pillow's seek parses each
    frame's every tag: a second for 5,000 frames), each one's width and length checked
    against MAX_PIXELS. A directory out of the file, cut short or met twice (a loop) is
    damage."""
    stream.seek(0)
    head = stream.read(8)
    order = "<" if head[:2] == b"II" else ">"
    (offset,) = struct.unpack(order + "I", head[4:8])
    seen: set[int] = set()
    pages = 0
    while offset:
        if offset in seen:
            raise _damaged(TIFF)
        seen.add(offset)
        if deadline is not None and pages % _FRAMES_PER_CHECK == 0:
            deadline.check()
        stream.seek(offset)
        raw = stream.read(2)
        if len(raw) < 2:
            raise _damaged(TIFF)
        (entries,) = struct.unpack(order + "H", raw)
        table = stream.read(entries * _IFD_ENTRY + 4)
        if len(table) < entries * _IFD_ENTRY + 4:
            raise _damaged(TIFF)
        sides = {}
        for at in range(0, entries * _IFD_ENTRY, _IFD_ENTRY):
            tag, kind, count = struct.unpack(order + "HHI", table[at : at + 8])
            if tag in (_WIDTH, _LENGTH) and count == 1 and kind in (_SHORT, _LONG):
                form = order + ("H" if kind == _SHORT else "I")
                (sides[tag],) = struct.unpack_from(form, table, at + 8)
        pages += 1
        if pages > max_pages:
            raise _too_many_pages(max_pages)
        width, length = sides.get(_WIDTH, 0), sides.get(_LENGTH, 0)
        if width * length > MAX_PIXELS:
            raise _too_large(pages, width, length)
        (offset,) = struct.unpack(order + "I", table[-4:])
    if not pages:
        raise _damaged(TIFF)
    return pages


def inspect(stream: BinaryIO, *, kind: str, limits: AcceptLimits, deadline: Deadline) -> Inspection:
    """The pages of the picture, counted from its frames' headers within `deadline`."""
    with _open(stream, kind) as image:
        pages = _pages(image, stream, kind, max_pages=limits.max_pages, deadline=deadline)
    return Inspection(kind=kind, pages=pages, estimated=False)


def extract(
    data: BinaryIO, *, kind: str, limits: ExtractLimits, page_budget: int | None = None
) -> Extracted:
    """A picture's pages, every one without text: its text is what OCR reads on them."""
    with _open(data, kind) as image:
        pages = _pages(image, data, kind, max_pages=limits.max_pages, deadline=None)
    check_page_budget(pages, budget=page_budget, complete=True)
    return Extracted(
        text=PAGE_BREAK * (pages - 1),
        page_count=pages,
        textless_pages=tuple(range(1, pages + 1)),
        page_starts=tuple(index * len(PAGE_BREAK) for index in range(pages)),
    )


def render_image_page(
    file: BinaryIO,
    kind: str,
    index: int,
    *,
    dpi: float,
    max_pixels: int,
    grey: bool = False,
    width: int | None = None,
) -> Image.Image:
    """Page `index` (from 0) of the picture in `file`, turned upright as its EXIF
    orientation says, at `dpi` or fewer (never more pixels than it has, nor more than
    `max_pixels`; at most `width` wide when given), in RGB, or greyscale with `grey`, on
    white where it is transparent; its `info["dpi"]` set when its resolution is known
    (OCR reads by it). UnreadableDocument if it cannot be decoded or is over MAX_PIXELS."""
    with _open(file, kind) as image:
        try:
            image.seek(index)
        except EOFError:
            raise UnreadableDocument(
                f"The picture has no page {index + 1}.", code="no_such_page"
            ) from None
        except _DECODE_ERRORS as exc:
            raise _damaged(kind) from exc
        _check_size(image, index + 1)
        try:
            # A PNG's EXIF may follow its pixels: reading it may decode them.
            upright = _UPRIGHT.get(image.getexif().get(_ORIENTATION, 1))
            stated = _stated_dpi(image)
            sides = image.size
            scale = min(1.0, (max_pixels / (sides[0] * sides[1])) ** 0.5)
            if stated:
                scale = min(scale, dpi / stated)
            if width is not None:  # the width it is seen at, once upright
                scale = min(scale, width / sides[1 if upright in _QUARTER_TURNS else 0])
            target = (max(1, round(sides[0] * scale)), max(1, round(sides[1] * scale)))
            mode = "L" if grey else "RGB"
            if kind == JPEG:
                image.draft(mode, target)  # decoded at a half, quarter or eighth of its size
            picture = _on_white(image).convert(mode)
        except _DECODE_ERRORS as exc:
            raise _damaged(kind) from exc
    if picture.size != target:
        picture = picture.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
    if upright is not None:
        picture = picture.transpose(upright)
    picture.info.pop("dpi", None)
    if stated:
        resolution = stated * target[0] / sides[0]
        picture.info["dpi"] = (resolution, resolution)
    return picture


# EXIF's orientation tag, and what turns each of its values upright (1 is upright).
_ORIENTATION = 0x0112
_UPRIGHT = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
# Those that swap its sides.
_QUARTER_TURNS = (
    Image.Transpose.TRANSPOSE,
    Image.Transpose.TRANSVERSE,
    Image.Transpose.ROTATE_90,
    Image.Transpose.ROTATE_270,
)


def _on_white(image: Image.Image) -> Image.Image:
    """The picture decoded, laid on white where it is transparent (a screenshot's text on
    nothing would otherwise turn black on black)."""
    if image.mode not in ("RGBA", "LA", "PA") and "transparency" not in image.info:
        return image
    rgba = image.convert("RGBA")
    return Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba)


def _stated_dpi(image: Image.Image) -> float | None:
    """The resolution the picture states, when it is one a scanner would give it."""
    try:
        dpi = float(image.info["dpi"][1])
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    if dpi <= 0 or max(image.size) / dpi > MAX_PAGE_INCHES:
        return None
    return dpi
