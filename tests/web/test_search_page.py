"""The search page: members find their organisation's documents by their words; each
result opens its document at its page, shows the matched words marked, its pages and
section; results are paged; one document can be searched alone."""

import re

import pytest
from lxml import html

from core.provider_breaker import breaker
from documents.models import Chunk
from documents.services.vocabulary import vocabulary_apply
from retrieval.embedding import PROVIDER
from tests.support.files import make_pdf
from tests.support.runs import document_with_chunks, drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


def _of_class(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


def _results(response) -> list[dict]:
    """What the page lists: each result's name, link, place line and snippet (its text,
    and the words it marks)."""
    tree = html.fromstring(response.content)
    listed = []
    for item in tree.xpath(f"//ol[{_of_class('results')}]/li"):
        [link] = item.xpath(f".//a[{_of_class('result-name')}]")
        [snippet] = item.xpath(f".//p[{_of_class('snippet')}]")
        listed.append(
            {
                "name": link.text,
                "href": link.get("href"),
                "where": item.xpath(f".//p[{_of_class('where')}]")[0].text_content(),
                "snippet": snippet.text_content(),
                "marked": [mark.text for mark in snippet.xpath(".//mark")],
                "elements": {child.tag for child in snippet.iter()} - {"p"},
            }
        )
    return listed


def _placed(document, *places: tuple[int | None, int | None, str]) -> None:
    """Give the document's chunks, in order, their pages and section."""
    for index, (start, end, section) in enumerate(places):
        Chunk.objects.filter(document=document, index=index).update(
            page_start=start, page_end=end, section=section
        )


def test_the_search_page_needs_a_login(client):
    response = client.get("/search/", {"q": "x"})

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_a_result_links_to_its_page_with_the_words_marked_its_pages_and_section(
    member_client, org, other_org
):
    minutes = document_with_chunks(
        org, "minutes.pdf", ["opening words", "the harbour board met on Tuesday"]
    )
    _placed(minutes, (1, 1, ""), (3, 4, "Board meetings"))
    document_with_chunks(other_org, "secret.pdf", ["the harbour board's secret"])

    response = member_client.get("/search/", {"q": "harbour board"})

    assert response.status_code == 200
    [result] = _results(response)
    assert result["name"] == "minutes.pdf"
    # The page holding the words, marked there, the first of them its anchor.
    assert result["href"] == f"/documents/{minutes.id}/?page=3&q=harbour+board#page-3-found"
    assert "p. 3–4" in result["where"] and "Board meetings" in result["where"]
    assert result["snippet"] == "the harbour board met on Tuesday"
    assert [w.lower() for w in result["marked"]] == ["harbour", "board"]
    assert "1 document found" in response.content.decode()


def test_a_result_without_pages_links_to_its_chunk_on_the_right_page_of_chunks(member_client, org):
    texts = [f"filler paragraph {n}" for n in range(25)] + ["the lighthouse keeper's log"]
    notes = document_with_chunks(org, "notes.docx", texts)
    _placed(notes, *[(None, None, "")] * 25, (None, None, "Keepers"))

    [result] = _results(member_client.get("/search/", {"q": "lighthouse"}))

    # 20 chunks a page on the document's page: chunk 25 is on its second.
    assert result["href"] == f"/documents/{notes.id}/?chunks=2&q=lighthouse#chunk-25"
    assert "p." not in result["where"] and "Keepers" in result["where"]
    # Followed, it opens the chunk with the word marked there, and nowhere else.
    opened = html.fromstring(member_client.get(result["href"]).content)
    assert [m.text for m in opened.xpath("//li[@id='chunk-25']//mark")] == ["lighthouse"]
    assert [m.text for m in opened.xpath("//ol[@class='chunks']//mark")] == ["lighthouse"]


def test_the_snippet_is_escaped_piece_by_piece_and_only_marks_are_markup(member_client, org):
    document_with_chunks(
        org, "odd.pdf", ['<script>alert("x")</script> harbour <b>bold</b> & <mark>harbour']
    )

    response = member_client.get("/search/", {"q": "harbour"})

    [result] = _results(response)
    page = response.content.decode()
    assert "<script>alert" not in page and "&lt;script&gt;alert(&quot;x&quot;)" in page
    assert result["elements"] == {"mark"}
    assert result["marked"] == ["harbour", "harbour"]
    assert "<b>bold</b> & <mark>harbour" in result["snippet"]


def test_results_are_paged_with_previous_and_next(member_client, org):
    for n in range(25):
        document_with_chunks(org, f"report-{n:02d}.pdf", [f"tide table number {n}"])

    first = member_client.get("/search/", {"q": "tide"})
    tree = html.fromstring(first.content)
    [following] = tree.xpath("//nav//a[@rel='next']")
    second = member_client.get("/search/" + following.get("href"))

    names = [r["name"] for r in _results(first)]
    more = [r["name"] for r in _results(second)]
    assert len(names) == 20 and len(more) == 5
    assert set(names) | set(more) == {f"report-{n:02d}.pdf" for n in range(25)}
    assert "offset=20" in following.get("href") and "q=tide" in following.get("href")
    assert not tree.xpath("//nav//a[@rel='prev']")
    later = html.fromstring(second.content)
    assert not later.xpath("//nav//a[@rel='next']")
    assert later.xpath("//nav//a[@rel='prev']")[0].get("href") == "?q=tide"
    assert "Documents 21–25" in second.content.decode()
    assert later.xpath("//ol")[0].get("start") == "21"
    beyond = member_client.get("/search/", {"q": "tide", "offset": "40"}).content.decode()
    assert "No more documents" in beyond and "Documents 41" not in beyond
    assert "offset=20" in beyond and 'rel="prev"' in beyond


def test_a_documents_search_lists_only_that_document_and_offers_all(member_client, org):
    log = document_with_chunks(org, "log.pdf", ["the harbour master's log"])
    document_with_chunks(org, "plan.pdf", ["a harbour plan with more harbour"])

    everywhere = _results(member_client.get("/search/", {"q": "harbour"}))
    response = member_client.get("/search/", {"q": "harbour", "document": str(log.id)})

    assert {r["name"] for r in everywhere} == {"log.pdf", "plan.pdf"}
    assert [r["name"] for r in _results(response)] == ["log.pdf"]
    tree = html.fromstring(response.content)
    [scope] = tree.xpath(f"//*[{_of_class('scope')}]")
    assert "Searching only log.pdf" in " ".join(scope.text_content().split())
    [everything] = [a for a in scope.xpath(".//a") if "Search all" in a.text_content()]
    assert everything.get("href") == "?q=harbour"
    # The form searches the same document again.
    [form] = tree.xpath("//main//form[@role='search']")
    assert form.xpath(".//input[@name='document']")[0].get("value") == str(log.id)


def test_a_documents_search_that_only_another_document_matches_lists_nothing(member_client, org):
    log = document_with_chunks(org, "log.pdf", ["the harbour master's log"])
    document_with_chunks(org, "plan.pdf", ["a lighthouse plan"])

    response = member_client.get("/search/", {"q": "lighthouse", "document": str(log.id)})

    assert _results(response) == []
    assert "0 passages found" in response.content.decode()


def test_another_organisations_document_or_a_bad_id_cannot_be_searched(member_client, other_org):
    theirs = document_with_chunks(other_org, "secret.pdf", ["harbour"])

    for value in (str(theirs.id), "not-an-id"):
        response = member_client.get("/search/", {"q": "harbour", "document": value})
        assert response.status_code == 404
        assert b"secret.pdf" not in response.content


def test_the_page_says_when_nothing_matches_and_shows_no_results_before_a_search(
    member_client, org
):
    document_with_chunks(org, "minutes.pdf", ["the harbour board"])

    empty = member_client.get("/search/").content.decode()
    nothing = member_client.get("/search/", {"q": "lighthouse"}).content.decode()

    assert "found" not in empty and 'name="q"' in empty
    assert "all your words come first, then those that hold most of them" in empty
    assert "0 documents found" in nothing and "No document holds the words" in nothing


def test_a_typo_offers_the_words_the_documents_hold_as_a_link(member_client, org):
    log = document_with_chunks(org, "log.pdf", ["the harbour master's log"])
    vocabulary_apply()  # the sweeper's

    for params, href in (
        ({"q": "harbuor master"}, "?q=harbour+master"),
        (
            {"q": "harbuor", "document": str(log.id), "order": "rank"},
            f"?q=harbour&document={log.id}&order=rank",
        ),
    ):
        tree = html.fromstring(member_client.get("/search/", params).content)
        [offer] = tree.xpath(f"//p[{_of_class('suggestion')}]")
        [link] = offer.xpath(".//a")
        assert " ".join(offer.text_content().split()).startswith("Did you mean harbour")
        assert link.get("href") == href
        assert [r["name"] for r in _results(member_client.get("/search/" + href))] == ["log.pdf"]

    spelt_right = html.fromstring(member_client.get("/search/", {"q": "harbour"}).content)
    assert spelt_right.xpath(f"//p[{_of_class('suggestion')}]") == []


@pytest.mark.parametrize("q", ["?!", "-harbour", "or"])
def test_a_query_without_a_word_to_find_says_so(member_client, q):
    response = member_client.get("/search/", {"q": q})

    assert response.status_code == 200
    assert "holds no word to find" in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_pdf_found_opens_at_the_page_that_holds_the_words(member_client, api, org):
    run = drive(accepted_run(api, make_pdf(4, words_per_page=300, label="Lighthouse")).id)
    assert run.status == "succeeded"

    results = _results(member_client.get("/search/", {"q": "lighthouse 3"}))

    [result] = results
    page = int(re.search(r"\?page=(\d+)&q=lighthouse\+3#page-\1-found$", result["href"])[1])
    holding = Chunk.objects.filter(document=run.document_id, text__contains="Lighthouse 3")
    assert page in {chunk.page_start for chunk in holding}
    assert {chunk.page_end for chunk in holding} == {3}
    # The link opens the text at that page, its anchor on it, the words in the text shown.
    opened = html.fromstring(member_client.get(result["href"]).content)
    assert opened.get_element_by_id(f"page-{page}").tag == "article"
    shown = " ".join(a.text_content() for a in opened.xpath("//article"))
    assert "Lighthouse 3" in shown
    # The words are marked on that page, its anchor just before the first of them.
    anchor = opened.get_element_by_id(f"page-{page}-found")
    assert anchor.getnext().tag == "mark" and anchor.getnext().text == "Lighthouse"


def test_the_search_box_on_a_documents_page_searches_that_document_alone(member_client, org):
    log = document_with_chunks(org, "log.pdf", ["the harbour master's log"])
    document_with_chunks(org, "plan.pdf", ["the harbour plan"])
    tree = html.fromstring(member_client.get(f"/documents/{log.id}/").content)
    [form] = tree.xpath("//main//form[@role='search']")

    # As the browser sends the form: its fields, the words typed in its search box.
    fields = {i.get("name"): i.get("value") or "" for i in form.xpath(".//input[@name]")}
    fields[form.xpath(".//input[@type='search']")[0].get("name")] = "harbour"
    response = member_client.get(form.get("action"), fields)

    assert form.get("method") == "get"
    assert [r["name"] for r in _results(response)] == ["log.pdf"]
    assert "Searching only" in response.content.decode()


def _notes(response) -> list[str]:
    tree = html.fromstring(response.content)
    return [" ".join(p.text_content().split()) for p in tree.xpath(f"//p[{_of_class('note')}]")]


def test_the_page_says_when_the_provider_could_not_rank_and_during_a_re_embed(
    member_client, org, settings, redis_conn, monkeypatch
):
    document_with_chunks(org, "old.pdf", ["tide tables", "harbour tide"])
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64  # a new model: one document re-embedded
    document_with_chunks(org, "new.pdf", ["tide clock"])

    # The default: the hashing embedder's vectors do not rank, and nothing needs saying.
    assert _notes(member_client.get("/search/", {"q": "tide"})) == []
    settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS = "always"
    [moving] = _notes(member_client.get("/search/", {"q": "tide"}))
    monkeypatch.setattr("core.provider_breaker.PAUSE_AFTER_FAILURES", 1)
    breaker(PROVIDER).failed()
    # The query searched a moment ago keeps its embedding (no call); a new one needs one.
    [kept] = _notes(member_client.get("/search/", {"q": "tide"}))
    [paused] = _notes(member_client.get("/search/", {"q": "harbour tide"}))

    assert "new embedding model: 33% of their text is on it" in moving
    assert kept == moving
    assert paused == "Ranked by their words only: the embedding provider is not answering."
