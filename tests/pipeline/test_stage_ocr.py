"""The OCR stage (pipeline/stages/ocr.py) with the real engine on real image-only PDFs:
who goes through it, what it reads, where the text goes, and that a worker stopped in the
middle goes on after the last page it finished, reading no page twice and charging once."""

import io
import os
import time

import pytest
from django.utils import timezone

from core.isolation import Limits
from documents.models import Document, DocumentText, PageReading, UsageEntry
from formats import page_reading
from formats.page_reading import read_page
from formats.render import RenderLimits, render_pdf_page
from pipeline.engine import execute_stage
from pipeline.models import StageAttempt
from pipeline.stages import ocr as ocr_stage
from tests.support import real_world, scans
from tests.support.files import make_pdf
from tests.support.hostile import png_stating
from tests.support.runs import drive
from tests.support.uploads import accepted_run, upload

pytestmark = pytest.mark.django_db(transaction=True)

LABELS = ["harbour", "lighthouse", "breakwater"]


def scanned_pdf(labels: list[str], *, dpi: int = 200) -> bytes:
    """An image-only PDF: each page of a typed PDF (one label a page) drawn at `dpi` and
    kept as a picture, as a scanner makes it. Its pages hold no text layer."""
    pages = [
        render_pdf_page(
            make_pdf(1, words_per_page=20, label=label.capitalize()),
            0,
            dpi=dpi,
            limits=RenderLimits(10**8),
        )
        for label in labels
    ]
    out = io.BytesIO()
    pages[0].save(out, "PDF", resolution=dpi, save_all=True, append_images=pages[1:])
    return out.getvalue()


def test_a_scanned_pdf_is_read_by_ocr_and_found_by_its_words(api, member_client):
    run = drive(accepted_run(api, scanned_pdf(LABELS), name="scan.pdf").id)

    assert run.status == "succeeded", run.error_message
    assert StageAttempt.objects.filter(run=run, stage="ocr", outcome="succeeded").count() == 1
    text = DocumentText.objects.get(document=run.document_id).text.lower()
    assert all(label in text for label in LABELS), text[:300]
    readings = PageReading.objects.filter(document=run.document_id).order_by("page")
    assert [r.page for r in readings] == [1, 2, 3]
    assert all(r.confidence > 0.5 and not r.problem for r in readings)
    assert Document.objects.get(id=run.document_id).textless_pages == []
    found = api.get("/api/v1/search", {"q": "lighthouse"}).json()["results"]
    assert [r["document_id"] for r in found] == [str(run.document_id)]
    # Small pages share a chunk: the one found spans page 2, where the word is.
    assert found[0]["page_start"] <= 2 <= found[0]["page_end"]
    page = member_client.get("/search/", {"q": "breakwater"}).content.decode()
    assert "scan.pdf" in page
    document = member_client.get(f"/documents/{run.document_id}/").content.decode()
    assert "3 of 3 pages read by OCR" in document


def test_a_pdf_with_text_passes_over_ocr(api):
    run = drive(accepted_run(api, make_pdf(2), name="typed.pdf").id)

    assert run.status == "succeeded", run.error_message
    assert not StageAttempt.objects.filter(run=run, stage="ocr").exists()
    assert not PageReading.objects.filter(document=run.document_id).exists()


def test_a_worker_stopped_mid_document_goes_on_after_the_last_page_it_read(api, monkeypatch):
    read = ocr_stage._read
    calls = []

    def stopped_at_the_second_page(kind, page, languages, file):
        calls.append(page)
        if len(calls) == 2:
            raise SystemExit("the worker is stopping")
        return read(kind, page, languages, file)

    run = accepted_run(api, scanned_pdf(LABELS), name="scan.pdf")
    assert execute_stage(str(run.id), "extract")["outcome"] == "succeeded"
    monkeypatch.setattr(ocr_stage, "_read", stopped_at_the_second_page)
    with pytest.raises(SystemExit):
        execute_stage(str(run.id), "ocr")
    first = PageReading.objects.get(document=run.document_id, page=1)
    resumed = []

    def recorded(kind, page, languages, file):
        resumed.append(page)
        return read(kind, page, languages, file)

    monkeypatch.setattr(ocr_stage, "_read", recorded)
    before = timezone.now()

    run = drive(run.id)

    assert run.status == "succeeded", run.error_message
    assert (calls, resumed) == ([1, 2], [2, 3])
    readings = PageReading.objects.filter(document=run.document_id).order_by("page")
    assert [r.page for r in readings] == [1, 2, 3]
    # Page 1 was not read again; pages 2 and 3 were read once, after the stop.
    assert readings[0].created_at == first.created_at < before
    assert all(r.created_at >= before for r in readings[1:])
    assert UsageEntry.objects.filter(document=run.document_id).count() == 1


def _hangs_on_page_two(kind, index, **arguments):
    """The page reader, but page 2 never finishes (run in the isolated child)."""
    if index == 1:
        time.sleep(3600)
    return read_page(kind, index, **arguments)


def _crashes_on_page_two(kind, index, **arguments):
    """The page reader, but page 2 kills its process, as a crash of the engine would."""
    if index == 1:
        os.abort()
    return read_page(kind, index, **arguments)


@pytest.mark.parametrize(
    ("reader", "why"),
    [
        (_hangs_on_page_two, "Reading this page took longer than 4 s, the limit for one page."),
        (_crashes_on_page_two, "Reading this page crashed the OCR engine"),
    ],
    ids=["hangs", "crashes"],
)
def test_a_page_that_hangs_or_crashes_the_engine_fails_only_that_page(
    api, member_client, monkeypatch, reader, why
):
    monkeypatch.setattr(page_reading, "read_page", reader)
    monkeypatch.setattr(
        ocr_stage,
        "page_limits",
        lambda: Limits(memory_bytes=1536 * 2**20, cpu_seconds=4, wall_seconds=4),
    )

    run = drive(accepted_run(api, scanned_pdf(LABELS), name="scan.pdf").id)

    assert run.status == "succeeded", run.error_message
    readings = PageReading.objects.filter(document=run.document_id).order_by("page")
    assert [(r.page, bool(r.text), r.problem[: len(why)]) for r in readings] == [
        (1, True, ""),
        (2, False, why),
        (3, True, ""),
    ]
    text = DocumentText.objects.get(document=run.document_id).text.lower()
    assert "harbour" in text and "breakwater" in text and "lighthouse" not in text
    document = api.get(f"/api/v1/documents/{run.document_id}").json()
    assert (document["unreadable_pages"], document["textless_pages"]) == ([2], [])
    assert [page["page"] for page in document["ocr_pages"]] == [1, 3]
    assert UsageEntry.objects.get(document=run.document_id).pages == 3
    page = member_client.get(f"/documents/{run.document_id}/").content.decode()
    assert "Page 2 could not be read; the rest was processed." in page
    at = page.find('id="page-2"')
    assert f"OCR could not read this page. {why}" in page, page[at : at + 1500]


def test_where_ocr_cannot_read_the_languages_a_scan_succeeds_and_says_why_it_has_no_text(
    api, member_client, settings
):
    # A language no engine here has: OCR is off for this organisation, as on a server
    # without an engine.
    settings.PAPERLANE_OCR_LANGUAGES = "qqq"

    run = drive(accepted_run(api, scanned_pdf(LABELS[:2]), name="scan.pdf").id)

    assert run.status == "succeeded", run.error_message
    assert not StageAttempt.objects.filter(run=run, stage="ocr").exists()
    document = api.get(f"/api/v1/documents/{run.document_id}").json()
    assert (document["textless_pages"], document["ocr_pages"]) == ([1, 2], [])
    page = member_client.get(f"/documents/{run.document_id}/").content.decode()
    assert "2 of 2 pages have no text; OCR is not available on this server" in page


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("congress-gray.pdf", ["consular", "japan"]),
        ("indirect-rotation.pdf", ["containership", "singapore"]),
    ],
)
def test_a_real_scan_is_found_by_words_a_person_reads_on_it(api, name, words):
    scan = (real_world.FOLDER / name).read_bytes()

    run = drive(accepted_run(api, scan, name=name).id)

    assert run.status == "succeeded", run.error_message
    for word in words:
        found = api.get("/api/v1/search", {"q": word}).json()["results"]
        assert [r["document_id"] for r in found] == [str(run.document_id)], word


def _own_words(text: str, count: int = 3) -> list[str]:
    """The longest words of a page's text: what a person would search it by."""
    return sorted(set(scans.words(text)), key=lambda word: (-len(word), word))[:count]


# A picture file of the scans, as a scanner or a phone saves it.
PICTURE_FILES = {
    "png": lambda made: scans.as_png(made[0]),
    "jpeg": lambda made: scans.as_jpeg(made[0]),
    "tiff": scans.as_tiff,
}


@pytest.mark.parametrize(
    ("name", "kind", "pages"),
    [
        ("letter.png", "png", ["serif-300"]),
        ("columns.jpg", "jpeg", ["two-columns-200"]),
        ("fax.tiff", "tiff", ["sans-200", "table-300", "mixed-300"]),
    ],
)
def test_a_scan_uploaded_as_a_picture_is_read_page_by_page_and_found(
    api, member_client, name, kind, pages
):
    made = [scans.make_scan(page) for page in pages]

    run = drive(accepted_run(api, PICTURE_FILES[kind](made), name=name).id)

    assert run.status == "succeeded", run.error_message
    document = api.get(f"/api/v1/documents/{run.document_id}").json()
    assert (document["kind"], document["page_count"]) == (kind, len(made))
    assert [page["page"] for page in document["ocr_pages"]] == list(range(1, len(made) + 1))
    assert UsageEntry.objects.get(document=run.document_id).pages == len(made)
    stored = DocumentText.objects.get(document=run.document_id)
    ends = [start - 2 for start in stored.page_starts[1:]] + [len(stored.text)]
    for scan, start, end in zip(made, stored.page_starts, ends, strict=True):
        assert scans.word_f1(scan.text, stored.text[start:end]) >= 0.9, (name, scan.name)
        for word in _own_words(scan.text):
            found = api.get("/api/v1/search", {"q": word}).json()["results"]
            assert str(run.document_id) in [r["document_id"] for r in found], word
    shown = member_client.get("/search/", {"q": _own_words(made[0].text)[0]}).content.decode()
    assert name in shown
    picture = api.get(f"/api/v1/documents/{run.document_id}/pages/{len(made)}/picture")
    assert (picture.status_code, picture["Content-Type"]) == (200, "image/webp")
    page = member_client.get(f"/documents/{run.document_id}/").content.decode()
    assert "<dt>Text read by</dt><dd>OCR (Tesseract)</dd>" in page


def test_a_picture_bomb_is_refused_at_upload_and_nothing_is_charged(api):
    response = upload(api, png_stating(200_000, 200_000), "bomb.png")

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "image_too_large"
    assert not Document.objects.exists() and not UsageEntry.objects.exists()
