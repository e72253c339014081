"""Pictures of paper as documents (formats/image.py): told by their bytes, their pages
counted from their frames within the accept budget, bombs refused from their headers,
and each page drawn upright, on white, at the resolution OCR wants."""

import io

import pytest
from PIL import Image

from core.errors import UnreadableDocument
from core.isolation import warm_up
from documents.reading import accept_limits, inspect_upload
from formats import extract, recognise
from formats.image import MAX_PIXELS, render_image_page
from formats.ocr import ocr_page
from formats.render import draw_page
from tests.support.hostile import png_stating
from tests.support.scans import as_jpeg, as_png, as_tiff, make_scan, word_f1

ENGLISH = ("eng",)


@pytest.fixture(autouse=True, scope="module")
def _fork_server():
    warm_up()


def tiff_of(frames: list[Image.Image]) -> bytes:
    out = io.BytesIO()
    frames[0].save(out, "TIFF", compression="tiff_deflate", save_all=True, append_images=frames[1:])
    return out.getvalue()


@pytest.mark.parametrize(
    ("make", "kind"), [(as_png, "png"), (as_jpeg, "jpeg"), (lambda s: as_tiff([s]), "tiff")]
)
def test_a_picture_is_told_by_its_bytes_whatever_it_is_called(make, kind):
    assert recognise(io.BytesIO(make(make_scan("sans-200")))) == kind


def test_a_tiff_has_a_page_a_frame_and_a_png_or_jpeg_one_page():
    scans = [make_scan("sans-200"), make_scan("two-columns-200"), make_scan("table-300")]

    counted = [
        inspect_upload(io.BytesIO(data)).pages
        for data in (as_tiff(scans), as_png(scans[0]), as_jpeg(scans[1]))
    ]

    assert counted == [3, 1, 1]


def test_extraction_counts_the_frames_again_and_every_page_waits_for_ocr(limits):
    extracted = extract("tiff", as_tiff([make_scan("sans-200")] * 3), limits)

    assert (extracted.page_count, extracted.textless_pages) == (3, (1, 2, 3))
    assert extracted.text.strip() == "" and len(extracted.page_starts) == 3


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (png_stating(100_000, 100_000), "The picture has more pixels than we accept"),
        (png_stating(8000, 8000), "The picture is 8000 × 8000 pixels (64 million)"),
        (
            tiff_of([Image.new("1", (10, 10)), Image.new("1", (9000, 9000))]),
            "Page 2 of the picture is 9000 × 9000 pixels",
        ),
    ],
    ids=["pillow-refuses-it", "over-our-bound", "second-frame-over"],
)
def test_a_picture_stating_too_many_pixels_is_refused_from_its_header(data, words):
    with pytest.raises(UnreadableDocument) as refused:
        inspect_upload(io.BytesIO(data))

    assert refused.value.code == "image_too_large"
    assert words in refused.value.message
    assert len(data) < 2_000_000  # the bomb: bytes that would decode to gigabytes


def _directories(data: bytes) -> list[int]:
    """Where each frame's directory of a little-endian TIFF ends (its next-offset field)."""
    ends, offset = [], int.from_bytes(data[4:8], "little")
    while offset:
        entries = int.from_bytes(data[offset : offset + 2], "little")
        end = offset + 2 + 12 * entries
        ends.append(end)
        offset = int.from_bytes(data[end : end + 4], "little")
    return ends


def _looped(data: bytes) -> bytes:
    first, last = int.from_bytes(data[4:8], "little"), _directories(data)[-1]
    return data[:last] + first.to_bytes(4, "little") + data[last + 4 :]


def _cut(data: bytes) -> bytes:
    return data[: _directories(data)[-1] - 6]


@pytest.mark.parametrize("damage", [_looped, _cut], ids=["frames-in-a-loop", "cut-short"])
def test_a_tiff_whose_frames_loop_or_are_cut_short_is_damaged(damage):
    data = damage(tiff_of([Image.new("1", (10, 10))] * 3))

    with pytest.raises(UnreadableDocument) as refused:
        inspect_upload(io.BytesIO(data))

    assert refused.value.code == "damaged_image"


def test_a_picture_within_the_bound_is_accepted_without_decoding_it():
    side = int(MAX_PIXELS**0.5)

    assert inspect_upload(io.BytesIO(png_stating(side, side))).pages == 1


def test_a_tiff_of_more_frames_than_pages_allowed_is_refused_within_the_accept_budget(settings):
    settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 5000
    frames = tiff_of([Image.new("1", (1, 1))] * 5001)

    with pytest.raises(UnreadableDocument) as refused:
        inspect_upload(io.BytesIO(frames))

    # Refused by the frames' count, not by the inspection's clock (inspection_too_slow).
    assert refused.value.code == "too_many_pages", refused.value.message
    assert "more than 5000 pages" in refused.value.message
    assert accept_limits().max_pages == 5000


@pytest.mark.parametrize(
    "data",
    [as_png(make_scan("sans-200"))[:4000], b"\x89PNG\r\n\x1a\n" + b"\x00" * 100],
    ids=["cut-short", "no-header"],
)
def test_a_damaged_picture_is_refused_with_a_clear_message_when_it_is_read(data):
    with pytest.raises(UnreadableDocument) as refused:
        draw_page("png", io.BytesIO(data), 0, dpi=300, max_pixels=10**8, grey=True)

    assert refused.value.code == "damaged_image"
    assert "could not be read" in refused.value.message


@pytest.mark.parametrize(("orientation", "turn"), [(3, 180), (6, 90), (8, 270)])
def test_a_photo_turned_by_its_exif_orientation_is_read_upright(orientation, turn):
    scan = make_scan("sans-200")
    # As a camera stores it: the sensor's pixels, and a tag saying how to turn them.
    stored = scan.image.rotate(turn, expand=True)
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    stored.save(out, "JPEG", quality=90, dpi=(scan.dpi, scan.dpi), exif=exif)

    page = render_image_page(out, "jpeg", 0, dpi=300, max_pixels=10**8, grey=True)

    assert page.size == scan.image.size
    assert word_f1(scan.text, ocr_page(page, languages=ENGLISH).text) >= 0.9


def test_a_transparent_picture_is_read_on_white():
    scan = make_scan("sans-200")
    # Black letters on nothing: every pixel black, the letters told by their alpha alone.
    ink = Image.eval(scan.image, lambda level: 255 - level)
    rgba = Image.merge("RGBA", (Image.new("L", ink.size, 0),) * 3 + (ink,))
    out = io.BytesIO()
    rgba.save(out, "PNG", dpi=(scan.dpi, scan.dpi))

    page = render_image_page(out, "png", 0, dpi=300, max_pixels=10**8, grey=True)

    assert word_f1(scan.text, ocr_page(page, languages=ENGLISH).text) >= 0.9


def test_a_scanners_resolution_is_believed_and_a_cameras_72_dpi_is_not():
    scan = make_scan("sans-200")
    scanned = render_image_page(io.BytesIO(as_png(scan)), "png", 0, dpi=300, max_pixels=10**8)
    photo = io.BytesIO()
    Image.new("RGB", (4000, 3000), "white").save(photo, "JPEG", dpi=(72, 72))

    taken = render_image_page(photo, "jpeg", 0, dpi=300, max_pixels=10**8)

    # The scan is not drawn larger than it was scanned; the photo says nothing of paper.
    assert scanned.size == scan.image.size and round(scanned.info["dpi"][0]) == 200
    assert taken.size == (4000, 3000) and "dpi" not in taken.info


def test_a_page_picture_is_drawn_smaller_for_a_small_width_and_a_pixel_bound():
    data = as_tiff([make_scan("sans-200"), make_scan("table-300")])

    thumb = draw_page("tiff", io.BytesIO(data), 1, dpi=96, max_pixels=3_000_000, width=200)
    bounded = draw_page("tiff", io.BytesIO(data), 1, dpi=300, max_pixels=1_000_000)

    assert thumb.width == 200 and thumb.mode == "RGB"
    assert bounded.width * bounded.height <= 1_000_000
