"""The documents list (paged, counted, filtered, newest first, each name a link) and a
page per document (its facts, runs, text by page, chunks, file), with the small JSON
answers that keep them up to date."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from connectors.models import ConnectorImport
from core.http import attachment
from documents.models import Chunk, Document, Membership, QuotaReservation, UsageEntry
from documents.services.organisations import member_add
from pipeline.models import ImportRun, Stage, StageAttempt
from pipeline.services.people import run_cancel
from pipeline.services.transitions import SWEEPER
from tests.support.admin import make_connections
from tests.support.files import make_docx, make_encrypted_pdf, make_pdf, with_outline
from tests.support.members import document_with_text, documents_made, signed_in
from tests.support.runs import document_with_chunks, drive, unchecked_run
from tests.support.uploads import accepted_run
from tests.support.world import world
from web.runs import STAGE_WORDS

pytestmark = pytest.mark.django_db


def _names(page: str) -> list[str]:
    return re.findall(r'class="name">([^<]+)</a>', page)


def test_the_list_shows_25_documents_a_page_newest_first_with_the_count(member_client, org):
    documents_made(org, 30)

    first = member_client.get("/").content.decode()
    second = member_client.get("/?page=2").content.decode()

    assert _names(first) == [f"doc-{n:03d}.pdf" for n in range(29, 4, -1)]
    assert _names(second) == [f"doc-{n:03d}.pdf" for n in range(4, -1, -1)]
    assert "30 documents</span>, newest first" in first
    assert "Page 1 of 2" in first and 'href="?page=2" rel="next"' in first
    assert 'href="?page=1" rel="prev"' in second


def test_the_list_asks_as_much_for_25_documents_as_for_1_counting_once_and_the_member_once(
    member_client, api, org
):
    def queries() -> list[str]:
        member_client.get("/")  # caches warmed (the session, content types)
        with CaptureQueriesContext(connection) as captured:
            assert member_client.get("/").status_code == 200
        return [query["sql"] for query in captured.captured_queries]

    accepted_run(api, make_pdf(1), "first.pdf")
    one = queries()
    for n in range(24):
        run = accepted_run(api, make_pdf(1), f"more-{n}.pdf")
        run_cancel(run=run, actor=SWEEPER)
    many = queries()

    assert len(many) == len(one)
    assert sum("COUNT(" in sql for sql in many) == 1
    assert sum('FROM "documents_membership"' in sql for sql in many) == 1


def test_each_name_links_to_the_documents_page(member_client, org):
    [document] = documents_made(org, 1)

    page = member_client.get("/").content.decode()

    assert f'<a href="/documents/{document.id}/" class="name">doc-000.pdf</a>' in page


def test_the_list_filters_by_status_type_and_source(member_client, api, org):
    member_client.post("/", {"file": _file("web.pdf", make_pdf(1))})
    api_run = accepted_run(api, make_docx(2), "api.docx")
    run_cancel(run=api_run, actor=SWEEPER)

    def names(query: str) -> list[str]:
        return _names(member_client.get(f"/?{query}").content.decode())

    assert names("") == ["api.docx", "web.pdf"]
    assert names("source=api") == ["api.docx"]
    assert names("source=web") == ["web.pdf"]
    assert names("kind=docx") == ["api.docx"]
    assert names("status=cancelled") == ["api.docx"]
    assert names("status=queued&kind=pdf") == ["web.pdf"]
    assert names("source=connector") == []
    page = member_client.get("/?source=api").content.decode()
    assert "1 of 2 documents match" in page and "source=api&amp;page=" not in page
    # A value the form does not offer: said, and nothing filtered.
    refused = member_client.get("/?status=exploded").content.decode()
    assert "That filter is not one this page knows" in refused and len(_names(refused)) == 2


def test_the_pages_of_a_filtered_list_keep_the_filter(member_client, org):
    documents_made(org, 30)

    page = member_client.get("/?kind=pdf").content.decode()

    assert 'href="?kind=pdf&amp;page=2" rel="next"' in page


def _text(page: str) -> str:
    """The extracted-text part of a document's page."""
    return page[page.index('data-part="text"') : page.index('data-part="chunks"')]


def _file(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data)


@pytest.mark.django_db(transaction=True)
def test_the_document_page_opens_the_text_at_page_n_with_its_anchor(org, api):
    client = signed_in(org, "vera", "viewer")
    run = drive(accepted_run(api, make_pdf(12, label="Tide table"), "tides.pdf").id)
    assert run.status == "succeeded", run.error_message

    first = client.get(f"/documents/{run.document_id}/").content.decode()
    later = client.get(f"/documents/{run.document_id}/?page=11").content.decode()

    assert 'id="page-1"' in first and 'id="page-10"' in first and 'id="page-11"' not in first
    assert "Tide table 1\n" in _text(first) and "Tide table 11" not in _text(first)
    assert 'id="page-11"' in later and 'id="page-12"' in later and 'id="page-10"' not in later
    assert "Page 11 of 12" in later and "Tide table 11" in _text(later)
    assert "Tide table 10" not in _text(later)
    # A page past the end: the last screen, marked as the one shown.
    beyond = client.get(f"/documents/{run.document_id}/?page=999").content.decode()
    assert '<span aria-current="page">Pages 11–12</span>' in beyond
    assert 'id="page-11"' in beyond and 'id="page-12"' in beyond
    assert f'href="/documents/{run.document_id}/file/"' in first
    # Its facts, its run's stages with their times, its chunks.
    assert "tides.pdf" in first and "12" in first and "API" in first
    for stage in ("Extract", "Embed", "Settle"):
        assert re.search(rf'<span class="stage">{stage}</span>: [^<]*done, took \d', first)
    assert "Chunk 0" in first
    assert '<th scope="row" data-label="Version">1 (current)</th>' in first
    assert "What search finds" in first
    # The search box asks the search page, within this document.
    assert 'action="/search/"' in first and f'name="document" value="{run.document_id}"' in first
    # A viewer is offered neither delete nor retry.
    assert "/delete/" not in first and "/retry/" not in first


def test_the_chunks_are_shown_twenty_a_page(org):
    client = signed_in(org, "vera", "viewer")
    document = document_with_chunks(org, "long.pdf", [f"piece number {n}" for n in range(25)])

    second = client.get(f"/documents/{document.id}/?chunks=2").content.decode()
    with CaptureQueriesContext(connection) as queries:
        first = client.get(f"/documents/{document.id}/").content.decode()

    assert 'id="chunk-0"' in first and 'id="chunk-19"' in first and 'id="chunk-20"' not in first
    assert "piece number 19" in first and "piece number 20" not in first
    assert (
        'id="chunk-20"' in second and "piece number 24" in second and 'id="chunk-0"' not in second
    )
    assert "25 chunks" in first and 'href="?chunks=2#chunks" rel="next"' in first
    # Shown without their vectors.
    chunk_reads = [q["sql"] for q in queries.captured_queries if "documents_chunk" in q["sql"]]
    assert chunk_reads and not [sql for sql in chunk_reads if '."embedding"' in sql]


@pytest.mark.django_db(transaction=True)
def test_each_chunk_shows_its_pages_linked_to_the_text_and_its_section(org, api, settings):
    settings.PAPERLANE_CHUNK_CHARS = 500
    pdf = with_outline(make_pdf(8, words_per_page=200), [("Tides", 1), ("Currents", 5)])
    run = drive(accepted_run(api, pdf, "almanac.pdf").id)
    assert run.status == "succeeded", run.error_message
    client = signed_in(org, "vera", "viewer")

    page = client.get(f"/documents/{run.document_id}/?chunks=2").content.decode()

    chunks = Chunk.objects.filter(document=run.document_id, index__gte=20, index__lt=40)
    assert chunks.count() > 3 and any(c.page_start != c.page_end for c in chunks)
    for chunk in chunks:
        head = re.search(rf'<li id="chunk-{chunk.index}"><p class="chunk-index">(.*?)</p>', page)[1]
        pages = (
            f"p. {chunk.page_start}"
            if chunk.page_start == chunk.page_end
            else f"p. {chunk.page_start}–{chunk.page_end}"
        )
        link = f'href="?chunks=2&amp;page={chunk.page_start}#page-{chunk.page_start}"'
        assert f'{link} class="pages">{pages}</a>' in head, head
        assert chunk.section == ("Currents" if chunk.page_start >= 5 else "Tides")
        assert f'<span class="section">{chunk.section}</span>' in head


def test_a_member_downloads_the_original_with_the_session(org, api):
    data = make_pdf(2)
    run = accepted_run(api, data, "minutes.pdf")
    client = signed_in(org, "vera", "viewer")

    response = client.get(f"/documents/{run.document_id}/file/")

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == data
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == 'attachment; filename="minutes.pdf"'
    assert Client().get(f"/documents/{run.document_id}/file/").status_code == 302


def test_the_page_and_the_api_name_a_download_alike_whatever_its_name(org, api):
    run = accepted_run(api, make_pdf(1), "plain.pdf")
    # As a connected folder may name a file: quotes, a backslash, a percent sign, accents.
    name = 'Ünter "quotes" \\ 100%41 résumé.pdf'
    Document.objects.filter(id=run.document_id).update(filename=name)
    client = signed_in(org, "vera", "viewer")

    page = client.get(f"/documents/{run.document_id}/file/")
    integration = api.get(f"/api/v1/documents/{run.document_id}/file")

    assert page["Content-Disposition"] == attachment(name)
    assert integration["Content-Disposition"] == attachment(name)
    assert page["Cache-Control"] == integration["Cache-Control"] == "private, no-store"


@pytest.mark.django_db(transaction=True)
def test_a_damaged_or_protected_file_offers_a_corrected_upload_not_a_retry(org, member_client):
    protected = drive(unchecked_run(org, make_encrypted_pdf(), kind="pdf", pages=2).id)
    assert (protected.status, protected.error_code) == ("failed", "encrypted_pdf")
    stopped = accepted_run(world(org).api, make_pdf(1), "stopped.pdf")
    run_cancel(run=stopped, actor=SWEEPER)

    listing = member_client.get("/").content.decode()
    page = member_client.get(f"/documents/{protected.document_id}/").content.decode()

    assert f"/runs/{protected.id}/retry/" not in listing + page
    assert "Upload a corrected file" in listing and "Upload a corrected file" in page
    assert "fix the file and upload the corrected one" in page
    assert "protected by a password" in page
    assert f"/runs/{stopped.id}/retry/" in listing


def test_the_live_answer_sends_the_rows_asked_for_of_ones_own_organisation(
    member_client, api, other_api
):
    mine = accepted_run(api, make_pdf(1), "mine.pdf")
    theirs = accepted_run(other_api, make_pdf(1), "theirs.pdf")

    answer = member_client.get(
        f"/documents/live/?id={mine.document_id}&id={theirs.document_id}"
    ).json()

    [row] = answer["documents"]
    assert row["id"] == str(mine.document_id) and row["active"] is True
    assert f'id="doc-{mine.document_id}"' in row["row"] and "Queued" in row["row"]
    assert "theirs.pdf" not in str(answer) and str(theirs.document_id) not in str(answer)
    assert "data-quota-held>1<" in answer["quota"] and answer["count"] == "1 document"
    # It changes when the run does.
    run_cancel(run=mine, actor=SWEEPER)
    again = member_client.get(f"/documents/live/?id={mine.document_id}").json()
    assert again["documents"][0]["digest"] != row["digest"]
    assert again["documents"][0]["active"] is False and "Cancelled" in again["documents"][0]["row"]


def test_the_live_answer_refuses_what_is_not_an_id_or_too_many(member_client):
    assert member_client.get("/documents/live/?id=nope").status_code == 400
    many = "&".join(f"id=00000000-0000-0000-0000-{n:012d}" for n in range(101))
    assert member_client.get(f"/documents/live/?{many}").status_code == 400


def _digests(page: str) -> dict[str, str]:
    """The digest of each live part of a document's page, as the page holds them."""
    return dict(re.findall(r'data-part="(\w+)" data-digest="(\w+)"', page))


def test_the_live_parts_link_with_the_pages_query_not_the_digests_it_sent(org):
    client = signed_in(org, "vera", "viewer")
    document = document_with_chunks(org, "long.pdf", [f"piece number {n}" for n in range(25)])
    Chunk.objects.filter(document=document, index=20).update(page_start=2, page_end=2)

    answer = client.get(
        f"/documents/{document.id}/live/?chunks=2&have=chunks:stale&have=text:stale"
    ).json()

    chunks = answer["parts"]["chunks"]["html"]
    assert 'href="?chunks=2&amp;page=2#page-2"' in chunks
    assert 'href="?chunks=1#chunks" rel="prev"' in chunks
    assert "have=" not in chunks and "have=" not in answer["parts"]["text"]["html"]


def test_the_document_pages_live_answer_sends_only_the_parts_that_changed(member_client, api):
    run = accepted_run(api, make_pdf(1), "one.pdf")
    url = f"/documents/{run.document_id}/"
    held = _digests(member_client.get(url).content.decode())
    have = "&".join(f"have={name}:{value}" for name, value in held.items())

    asked = member_client.get(f"{url}live/?page=1")
    with CaptureQueriesContext(connection) as unchanged_queries:
        unchanged = member_client.get(f"{url}live/?page=1&{have}")
    # Read now: the next request empties the log the capture reads.
    sql = " ".join(query["sql"] for query in unchanged_queries.captured_queries)
    run_cancel(run=run, actor=SWEEPER)
    changed = member_client.get(f"{url}live/?page=1&{have}").json()

    # Asked without digests: every part, each with its digest, as the page has them.
    assert set(held) == {"facts", "status", "text", "chunks"}
    answer = asked.json()
    assert answer["active"] is True and answer["digest"]
    assert {name: part["digest"] for name, part in answer["parts"].items()} == held
    assert "Queued" in answer["parts"]["status"]["html"]
    assert "No text yet" in answer["parts"]["text"]["html"]
    # Nothing changed: the digest and whether it is active, nothing rendered or read.
    assert unchanged.json() == {"digest": answer["digest"], "active": True}
    assert "documents_document" in sql
    assert "documents_documenttext" not in sql and "documents_chunk" not in sql
    # Its run cancelled: the processing part, and the others that no longer wait for it
    # (its version's search, its text, its chunks) say it was cancelled.
    assert changed["active"] is False and changed["digest"] != answer["digest"]
    assert set(changed["parts"]) == {"facts", "status", "text", "chunks"}
    assert "Cancelled" in changed["parts"]["status"]["html"]
    assert "No: its processing was cancelled" in changed["parts"]["facts"]["html"]
    assert "No text: its processing was cancelled" in changed["parts"]["text"]["html"]


def test_the_live_answers_refuse_in_json_a_session_that_ended_and_a_document_gone(
    member_client, api, org
):
    run = accepted_run(api, make_pdf(1), "gone.pdf")
    page, listing = f"/documents/{run.document_id}/live/", f"/documents/live/?id={run.document_id}"
    member_client.post(f"/documents/{run.document_id}/delete/")
    stranger = signed_in(org, "sam", "member")
    Membership.objects.filter(user__username="sam").delete()

    gone = member_client.get(page)
    signed_out = [Client().get(page), Client().get(listing)]
    no_member = stranger.get(listing)

    assert gone.status_code == 404 and gone.json()["code"] == "not_found"
    assert "not there any more" in gone.json()["detail"]
    for answer in signed_out:
        assert answer.status_code == 401, answer
        assert answer.json() == {
            "detail": "You were signed out; sign in again.",
            "code": "unauthorized",
        }
    assert no_member.status_code == 403 and no_member.json()["code"] == "forbidden"


def test_a_viewer_is_offered_no_upload_cancel_delete_or_tokens(org, api):
    run = accepted_run(api, make_pdf(1), "minutes.pdf")
    viewer = signed_in(org, "vera", "viewer")

    listing = viewer.get("/").content.decode()
    page = viewer.get(f"/documents/{run.document_id}/").content.decode()

    for html in (listing, page):
        assert 'type="file"' not in html and "/delete/" not in html
        assert "/cancel/" not in html and "/tokens/" not in html
    assert ">Viewer</span>" in listing


def test_a_deleted_document_is_a_404_on_its_pages(member_client, api):
    run = accepted_run(api, make_pdf(1), "gone.pdf")
    member_client.post(f"/documents/{run.document_id}/delete/")

    for suffix in ("", "live/", "file/"):
        assert member_client.get(f"/documents/{run.document_id}/{suffix}").status_code == 404
    assert ImportRun.objects.get(id=run.id).status == "cancelled"


def test_a_document_page_shows_its_newest_runs_and_counts_the_others(member_client, api):
    first = accepted_run(api, make_pdf(1), "often.pdf")
    for _ in range(22):  # as a connected file's versions would each make one
        ImportRun.objects.create(
            organisation=first.organisation,
            document=first.document,
            reservation=QuotaReservation.objects.create(
                organisation=first.organisation, pages=0, status="released"
            ),
            source="connector",
            status="cancelled",
        )

    page = member_client.get(f"/documents/{first.document_id}/").content.decode()

    assert page.count('<li class="run">') == 20
    assert "and 3 older runs, not shown." in page
    # Where it came from is its first run's source, however many came after.
    assert "<dt>Source</dt><dd>API" in page


def test_a_document_page_and_its_live_answer_ask_as_much_for_6_runs_as_for_1(
    member_client, api, org
):
    first = accepted_run(api, make_pdf(1), "often.pdf")
    people = [member_add(organisation=org, username=f"m{n}") for n in range(5)]
    page, live = f"/documents/{first.document_id}/", f"/documents/{first.document_id}/live/"

    def queries(url: str) -> int:
        member_client.get(url)  # caches warmed (the session, content types)
        with CaptureQueriesContext(connection) as captured:
            assert member_client.get(url).status_code == 200
        return len(captured)

    one = (queries(page), queries(live))
    for person in people:
        run = ImportRun.objects.create(
            organisation=org,
            document=first.document,
            reservation=QuotaReservation.objects.create(
                organisation=org, pages=0, status="released"
            ),
            source="web",
            status="cancelled",
            created_by=person,
        )
        StageAttempt.objects.create(run=run, stage="extract", number=1, started_at=run.created_at)

    six = (queries(page), queries(live))
    assert six == one


def _versions(page: str) -> list[list[str]]:
    """The versions table of a document's page, a row a version, its cells' text."""
    table = page[page.index('<table class="cards versions"') : page.index("</table>")]
    rows = re.findall(r"<tr[^>]*>\s*<th scope=\"row\"(.*?)</tr>", table, re.S)
    return [
        [
            re.sub(r"<[^>]+>", "", cell).replace("\xa0", " ").strip()
            for cell in re.findall(r">(.*?)</t[hd]>", row, re.S)
        ]
        for row in rows
    ]


def test_a_connected_documents_page_lists_its_versions_and_which_one_search_finds(
    member_client, org
):
    [connection] = make_connections(org, 1)
    document = document_with_text(org, ["one\n", "two\n", "three\n"])
    first = ConnectorImport.objects.get(connection=connection)
    ConnectorImport.objects.filter(id=first.id).update(
        document=document, document_version=1, size_bytes=30_000
    )
    ConnectorImport.objects.create(
        organisation=org,
        connection=connection,
        file_id="file-1",
        content_version="2",
        name="scan.pdf",
        path=first.path,
        size_bytes=45_000,
        document=document,
        document_version=2,
    )
    UsageEntry.objects.create(organisation=org, document=document, document_version=1, pages=3)
    # Its second version is stored and being read: search still finds the first.
    Document.objects.filter(id=document.id).update(
        version=2, searchable_version=1, size_bytes=45_000, page_count=None
    )

    page = member_client.get(f"/documents/{document.id}/").content.decode()

    [current, older] = _versions(page)
    assert current[0] == "2 (current)" and current[2:] == [
        "43.9 KB",
        "–",
        "Not yet: search finds version 1 until this one is done",
    ]
    assert older[0] == "1" and older[2:] == ["29.3 KB", "3", "What search finds"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", current[1])


def test_an_uploads_page_lists_its_one_version(member_client, api):
    run = accepted_run(api, make_pdf(2), "upload.pdf")

    page = member_client.get(f"/documents/{run.document_id}/").content.decode()

    [only] = _versions(page)
    # Its pages are counted when its text is read.
    assert only[0] == "1 (current)" and only[3:] == ["–", "Not yet: once it is processed"]
    assert only[2] == f"{run.document.size_bytes / 1024:.1f} KB"


def test_every_stage_says_what_it_does_in_words():
    assert set(STAGE_WORDS) == set(Stage)
