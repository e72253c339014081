"""Pages as pictures (formats/render.py): the size asked for, never more pixels than the
limit, greyscale for OCR, a clear refusal for what cannot be drawn, and a page as a file
of the format people are sent."""

import io

import pytest
from PIL import Image

from core.errors import UnreadableDocument
from formats.render import RenderLimits, page_picture, render_pdf_page
from tests.support.files import make_pdf

LIMITS = RenderLimits(max_pixels=20_000_000)


def test_a_letter_page_at_150_dpi_is_1275_by_1650_pixels():
    picture = render_pdf_page(make_pdf(2), 1, dpi=150, limits=LIMITS)

    assert (picture.mode, abs(picture.width - 1275) <= 1, abs(picture.height - 1650) <= 1) == (
        "RGB",
        True,
        True,
    )


def test_a_page_is_drawn_smaller_rather_than_past_the_pixel_limit():
    picture = render_pdf_page(make_pdf(1), 0, dpi=3000, limits=RenderLimits(max_pixels=10**6))

    assert picture.width * picture.height <= 10**6
    assert picture.width > 800


def test_ocr_gets_greyscale_with_ink_on_it():
    picture = render_pdf_page(make_pdf(1), 0, dpi=100, limits=LIMITS, grey=True)

    assert picture.mode == "L"
    darkest, lightest = picture.getextrema()
    assert darkest < 128 < lightest  # text on paper


@pytest.mark.parametrize(
    ("data", "index", "code"),
    [(make_pdf(1), 1, "no_such_page"), (b"%PDF-1.4 junk", 0, "damaged_pdf")],
)
def test_what_cannot_be_drawn_is_refused_clearly(data, index, code):
    with pytest.raises(UnreadableDocument) as refused:
        render_pdf_page(data, index, dpi=72, limits=LIMITS)

    assert refused.value.code == code


def test_a_page_asked_no_wider_than_200_pixels_keeps_its_shape():
    picture = render_pdf_page(make_pdf(1), 0, dpi=96, limits=LIMITS, width=200)

    assert picture.width <= 200 and picture.width >= 199
    assert abs(picture.height / picture.width - 11 / 8.5) < 0.02  # a Letter page


@pytest.mark.parametrize(
    ("image_format", "pillow_name"), [("webp", "WEBP"), ("jpeg", "JPEG"), ("png", "PNG")]
)
def test_a_page_picture_is_a_file_of_the_format_asked(image_format, pillow_name):
    data = page_picture(
        "pdf",
        0,
        dpi=96,
        width=None,
        max_pixels=10**6,
        image_format=image_format,
        file=io.BytesIO(make_pdf(1)),
    )

    picture = Image.open(io.BytesIO(data))
    assert (picture.format, picture.width) == (pillow_name, 816)


def test_a_picture_says_the_resolution_it_was_drawn_at():
    asked = render_pdf_page(make_pdf(1), 0, dpi=150, limits=LIMITS)
    shrunk = render_pdf_page(make_pdf(1), 0, dpi=3000, limits=RenderLimits(max_pixels=10**6))

    assert round(asked.info["dpi"][0]) == 150
    assert 80 < shrunk.info["dpi"][0] < 3000  # the resolution it has, not the one asked for
