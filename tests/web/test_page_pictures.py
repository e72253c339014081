"""Pictures of a PDF's pages: a preview of its first page in the documents list, a
picture of each page beside its text on its page, served under the organisation's walls
with caching headers, drawn in the isolated child once and kept."""

import io
import re
import time

import pytest
from PIL import Image

from documents.models import Document
from documents.pictures import page_picture_key
from documents.storage import storage_open
from tests.support.files import make_docx, make_pdf
from tests.support.members import signed_in
from tests.support.runs import drive, stored_bytes_replace
from tests.support.uploads import accepted_run

# The documents are read by their stages, as workers would: a page is counted then.
pytestmark = pytest.mark.django_db(transaction=True)


def _read(api, data: bytes, name: str):
    run = drive(accepted_run(api, data, name).id)
    assert run.status == "succeeded", run.error_message
    return run


def _picture_url(document_id, number: int, size: str) -> str:
    return f"/documents/{document_id}/pages/{number}.webp?size={size}"


def test_a_page_picture_is_a_404_to_another_organisation_and_seen_by_a_viewer(org, other_org, api):
    run = _read(api, make_pdf(3, label="Ledger"), "ledger.pdf")
    viewer = signed_in(org, "vera", "viewer")
    stranger = signed_in(other_org, "otto", "admin")

    page = viewer.get(_picture_url(run.document_id, 2, "page"))
    theirs = stranger.get(_picture_url(run.document_id, 2, "page"))

    assert theirs.status_code == 404
    assert page.status_code == 200, page.content[:200]
    assert page["Content-Type"] == "image/webp"
    picture = Image.open(io.BytesIO(page.content))
    assert picture.format == "WEBP" and picture.width == 816  # a Letter page at 96 dpi
    thumb = Image.open(io.BytesIO(viewer.get(_picture_url(run.document_id, 1, "thumb")).content))
    assert thumb.width == 200
    # Kept in the document's storage folder once drawn.
    document = Document.objects.get(id=run.document_id)
    with storage_open(key=page_picture_key(document=document, number=2, size="page")) as kept:
        assert kept.read() == page.content


def test_a_page_picture_answers_304_to_its_etag_and_is_cached_privately(org, api):
    run = _read(api, make_pdf(2), "two.pdf")
    viewer = signed_in(org, "vera", "viewer")
    url = _picture_url(run.document_id, 1, "thumb")

    first = viewer.get(url)
    again = viewer.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    other_page = viewer.get(_picture_url(run.document_id, 2, "thumb"))

    assert first.status_code == 200 and first["ETag"]
    assert re.fullmatch(r"private, max-age=\d+", first["Cache-Control"])
    assert again.status_code == 304 and again["ETag"] == first["ETag"] and not again.content
    assert other_page["ETag"] != first["ETag"]
    # A new version of the file is a new picture.
    Document.objects.filter(id=run.document_id).update(version=2)
    assert viewer.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code != 304


def test_bad_page_numbers_sizes_and_a_docx_have_no_picture(org, api):
    pdf = _read(api, make_pdf(2), "two.pdf")
    docx = _read(api, make_docx(2), "two.docx")
    viewer = signed_in(org, "vera", "viewer")

    for url in (
        _picture_url(pdf.document_id, 0, "page"),
        _picture_url(pdf.document_id, 3, "page"),
        _picture_url(pdf.document_id, 1, "poster"),
        _picture_url(docx.document_id, 1, "page"),
    ):
        assert viewer.get(url).status_code == 404, url
    # A picture it cannot have is none, whatever ETag the request claims to hold.
    for number, size in ((1, "poster"), (3, "page")):
        claimed = f'"{pdf.document_id}-v1-p{number}-{size}-r1"'
        url = _picture_url(pdf.document_id, number, size)
        assert viewer.get(url, HTTP_IF_NONE_MATCH=claimed).status_code == 404, url
    api_url = f"/api/v1/documents/{pdf.document_id}/pages/3/picture"
    claimed = f'"{pdf.document_id}-v1-p3-page-r1"'
    assert api.get(api_url, HTTP_IF_NONE_MATCH=claimed).status_code == 404


def test_the_list_previews_a_pdfs_first_page_lazily_and_a_docx_not(org, api):
    pdf = _read(api, make_pdf(2), "two.pdf")
    docx = _read(api, make_docx(2), "two.docx")
    viewer = signed_in(org, "vera", "viewer")

    page = viewer.get("/").content.decode()

    rows = {m[1]: m[2] for m in re.finditer(r'<tr id="doc-([0-9a-f-]+)"(.*?)</tr>', page, re.S)}
    thumb = re.search(r"<img [^>]*>", rows[str(pdf.document_id)])[0]
    assert f'src="/documents/{pdf.document_id}/pages/1.webp?size=thumb' in thumb
    assert 'loading="lazy"' in thumb and 'alt="' in thumb
    assert re.search(r'width="\d+"', thumb) and re.search(r'height="\d+"', thumb)
    assert "<img" not in rows[str(docx.document_id)]


def test_a_300_page_pdfs_page_answers_within_a_second_with_one_screen_of_pictures(org, api):
    run = _read(api, make_pdf(300, words_per_page=20), "long.pdf")
    viewer = signed_in(org, "vera", "viewer")
    viewer.get(f"/documents/{run.document_id}/")  # caches warmed (the session, templates)

    started = time.perf_counter()
    response = viewer.get(f"/documents/{run.document_id}/?page=145")
    seconds = time.perf_counter() - started

    page = response.content.decode()
    assert response.status_code == 200 and seconds < 1.0, seconds
    pictures = re.findall(rf'src="/documents/{run.document_id}/pages/(\d+)\.webp\?size=page', page)
    assert pictures == [str(n) for n in range(141, 151)]
    assert 'id="page-145"' in page and 'id="page-151"' not in page and 'id="page-140"' not in page
    assert '<span aria-current="page">Pages 141–150</span>' in page
    assert 'href="?page=151#page-151"' in page and 'href="?page=1#page-1"' in page
    # Pictures arrive only as they are scrolled to, in boxes that keep the layout still.
    for tag in re.findall(r"<img [^>]*pages/\d+\.webp[^>]*>", page):
        assert 'loading="lazy"' in tag and 'width="' in tag and 'height="' in tag


def test_a_docx_page_says_quietly_it_has_no_pictures(org, api):
    run = _read(api, make_docx(2), "two.docx")
    viewer = signed_in(org, "vera", "viewer")

    page = viewer.get(f"/documents/{run.document_id}/").content.decode()

    assert "/pages/" not in page


def test_a_page_that_cannot_be_drawn_is_a_404_drawn_once_not_at_every_ask(org, api):
    run = _read(api, make_pdf(2), "two.pdf")
    document = Document.objects.get(id=run.document_id)
    stored_bytes_replace(document, b"%PDF-1.7\n" + b"\x00" * 2000)  # damaged after reading
    viewer = signed_in(org, "vera", "viewer")
    url = _picture_url(run.document_id, 1, "page")
    key = page_picture_key(document=document, number=1, size="page")

    first = viewer.get(url)
    stored_bytes_replace(document, make_pdf(2))  # were it drawn again, it would be seen
    again = viewer.get(url)

    assert first.status_code == 404 and again.status_code == 404
    # What is kept says "no picture": the next ask reads it instead of drawing again.
    with storage_open(key=key) as kept:
        assert kept.read() == b""


def test_deleting_a_document_removes_its_kept_pictures(org, api, member_client):
    run = _read(api, make_pdf(2), "two.pdf")
    document = Document.objects.get(id=run.document_id)
    assert member_client.get(_picture_url(document.id, 2, "thumb")).status_code == 200
    key = page_picture_key(document=document, number=2, size="thumb")

    member_client.post(f"/documents/{document.id}/delete/")

    assert member_client.get(_picture_url(document.id, 2, "thumb")).status_code == 404
    with pytest.raises(FileNotFoundError):
        storage_open(key=key)


def test_the_api_sends_a_page_picture_to_its_organisation_alone_with_its_etag(org, api, other_api):
    run = _read(api, make_pdf(2), "two.pdf")
    url = f"/api/v1/documents/{run.document_id}/pages/2/picture?size=thumb"

    picture = api.get(url)
    again = api.get(url, HTTP_IF_NONE_MATCH=picture["ETag"])
    theirs = other_api.get(url)
    past_the_end = api.get(f"/api/v1/documents/{run.document_id}/pages/3/picture")

    assert picture.status_code == 200 and picture["Content-Type"] == "image/webp"
    assert Image.open(io.BytesIO(picture.content)).width == 200
    assert re.fullmatch(r"private, max-age=\d+", picture["Cache-Control"])
    assert again.status_code == 304
    assert theirs.status_code == 404 and theirs.json()["code"] == "not_found"
    assert past_the_end.status_code == 404 and past_the_end.json()["code"] == "not_found"
