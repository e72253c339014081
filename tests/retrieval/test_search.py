"""GET /search: every word matched, ranked by embedding, one result per document, only the
caller's organisation, bounded in time; on PostgreSQL through the chunks' text index."""

from urllib.parse import urlencode

import pytest
from django.db import connection, transaction
from django.utils import timezone

from core.provider_breaker import breaker
from documents.models import Document
from documents.services.content import document_chunks_upsert
from retrieval.embedding import PROVIDER, get_embedder, pack_vector
from retrieval.search import (
    CANDIDATES_SQL,
    MAX_QUERY_CHARS,
    _candidates_by_substring,
    _terms,
    marked_snippet,
    snippet,
)
from tests.support.files import make_pdf
from tests.support.runs import document_with_chunks, drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


def _search(client, q: str, **params):
    return client.get("/api/v1/search", {"q": q, **params})


@pytest.mark.django_db(transaction=True)  # the stages commit, as in a worker
def test_it_finds_the_uploaded_documents_that_hold_every_word(api):
    glacier = accepted_run(api, make_pdf(2, label="Glacier moraine"), name="glacier.pdf")
    desert = accepted_run(api, make_pdf(1, label="Desert dune"), name="desert.pdf")
    for run in (glacier, desert):
        assert drive(run.id).status == "succeeded"

    body = _search(api, "moraine glacier").json()

    assert body["ranking"] == "embedding"
    [hit] = body["results"]
    assert hit["document_id"] == str(glacier.document_id)
    assert hit["filename"] == "glacier.pdf"
    assert hit["pages"] == 2
    assert "Glacier moraine" in hit["snippet"]
    assert hit["score"] == 1  # first by its text and by its embedding
    assert _search(api, "glacier dune").json()["results"] == []  # no document has both


def test_another_organisations_documents_are_never_found(api, org, other_org):
    document_with_chunks(org, "ours.pdf", ["the lighthouse keeper's log"])
    document_with_chunks(other_org, "theirs.pdf", ["the lighthouse keeper's secret"])

    results = _search(api, "lighthouse").json()["results"]

    assert [hit["filename"] for hit in results] == ["ours.pdf"]


def test_closer_chunks_rank_first_and_each_document_appears_once(api, org):
    tail = " ".join(["lorem ipsum dolor sit amet"] * 30)
    near = document_with_chunks(
        org, "near.pdf", ["harbour harbour harbour pilot", f"harbour {tail}"]
    )
    far = document_with_chunks(org, "far.pdf", [f"a harbour mentioned once among {tail}"])

    results = (
        _search(api, "harbour pilot").json()["results"] + _search(api, "harbour").json()["results"]
    )

    assert [hit["document_id"] for hit in results] == [str(near.id), str(near.id), str(far.id)]
    assert results[1]["chunk_index"] == 0  # near's best chunk, not its long second one
    assert results[1]["score"] > results[2]["score"]


def test_quoted_phrases_and_minus_words_narrow_the_search(api, org):
    document_with_chunks(org, "tide.pdf", ["the high tide table for March"])
    document_with_chunks(org, "table.pdf", ["a table of high and low water"])

    def found(q):
        return sorted(hit["filename"] for hit in _search(api, q).json()["results"])

    assert found("high table") == ["table.pdf", "tide.pdf"]
    assert found('"tide table"') == ["tide.pdf"]
    assert found("high table -tide") == ["table.pdf"]
    assert found("march or water") == ["table.pdf", "tide.pdf"]
    assert found("table or -tide") == []  # the index cannot answer it: nothing, not everything


def test_limit_caps_the_documents_returned(api, org):
    for number in range(5):
        document_with_chunks(org, f"{number}.pdf", [f"beacon number {number}"])

    assert len(_search(api, "beacon", limit=3).json()["results"]) == 3
    assert len(_search(api, "beacon", limit=50).json()["results"]) == 5
    assert _search(api, "beacon", limit=51).status_code == 422


@pytest.mark.parametrize(
    ("q", "status", "code"),
    [
        ("", 422, "invalid_request"),
        ("!?", 422, "invalid_request"),
        ("x" * 301, 422, "invalid_request"),
        ("-tide", 400, "query_empty"),
        ("-tide -chain", 400, "query_empty"),
    ],
)
def test_a_query_without_words_or_too_long_is_refused_clearly(api, q, status, code):
    response = _search(api, q)

    assert response.status_code == status
    assert response.json()["code"] == code


def test_the_longest_query_in_any_script_fits_a_request_line_gunicorn_takes():
    # 4094 bytes: gunicorn's --limit-request-line; each emoji is 4 bytes, 12 encoded.
    line = (
        "GET /api/v1/search?"
        + urlencode({"q": "\U0001f30a" * MAX_QUERY_CHARS, "limit": 50})
        + " HTTP/1.1"
    )

    assert len(line) <= 4094


def test_a_missing_query_or_token_gets_the_api_errors(api, client):
    assert api.get("/api/v1/search").status_code == 422
    assert client.get("/api/v1/search", {"q": "x"}).status_code == 401


def test_with_the_provider_paused_it_ranks_by_text_and_says_so(api, org, redis_conn, settings):
    settings.PAPERLANE_PROVIDER_PAUSE_AFTER_FAILURES = 1
    document_with_chunks(org, "kept.pdf", ["the anchor chain"])
    breaker(PROVIDER).failed()

    body = _search(api, "anchor").json()

    assert body["ranking"] == "text"
    assert [hit["filename"] for hit in body["results"]] == ["kept.pdf"]
    assert body["results"][0]["score"] == 1  # first by text, the only order there is


def test_a_search_slower_than_its_budget_is_a_503_not_a_held_thread(api, org, settings):
    settings.PAPERLANE_SEARCH_TIMEOUT_MS = 1
    text = "compass " + " ".join(f"word{i}" for i in range(200))
    vector = [1.0] + [0.0] * (get_embedder().dimensions - 1)
    for batch in range(4):
        document_with_chunks(org, f"{batch}.pdf", [text] * 500, vectors=[vector] * 500)

    response = _search(api, "compass")

    assert response.status_code == 503
    assert response.json()["code"] == "search_timeout"
    with connection.cursor() as cursor:  # the budget was for that statement only
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


def test_postgresql_finds_the_candidates_through_the_text_index(org):
    document_with_chunks(org, "a.pdf", ["sextant"])
    with transaction.atomic(), connection.cursor() as cursor:
        # As on a large table, where neither scanning it nor every document's chunks pays.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_nestloop = off")
        cursor.execute("EXPLAIN " + CANDIDATES_SQL, ["sextant", org.id, None, None, 5000, 10])
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "documents_chunk_text_search" in plan


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("short text with a needle", "short text with a needle"),
        ("x " * 200 + "needle" + " y" * 200, "needle"),
    ],
)
def test_snippets_show_the_text_around_the_first_word_found(text, expected):
    piece = snippet(text, ["needle"])

    assert expected in piece
    assert len(piece) <= 242
    if len(text) > 240:
        assert piece.startswith("…") and piece.endswith("…")


def test_the_words_of_a_query_leave_out_operators_and_minus_words():
    assert _terms('"Tide table" or March -water') == (["tide", "table", "march"], ["water"])


def test_a_deleted_document_is_not_found_even_if_its_chunks_were_left(api, org):
    kept = document_with_chunks(org, "kept.pdf", ["the buoy"])
    gone = document_with_chunks(org, "gone.pdf", ["the buoy"])
    Document.objects.filter(id=gone.id).update(deleted_at=timezone.now())  # chunks left behind

    results = _search(api, "buoy").json()["results"]

    assert [hit["document_id"] for hit in results] == [str(kept.id)]


def test_only_the_first_matches_found_are_ranked(api, org, settings):
    settings.PAPERLANE_SEARCH_MATCHES_RANKED = 3
    for number in range(6):
        document_with_chunks(org, f"{number}.pdf", [f"the tern {number}"])

    results = _search(api, "tern").json()["results"]

    assert len(results) == 3


def test_a_provider_failing_in_its_own_way_leaves_the_search_ranked_by_text(api, org, monkeypatch):
    document_with_chunks(org, "kept.pdf", ["the anchor chain"])

    def refuses(texts):
        raise ValueError("the provider's own error")

    monkeypatch.setattr(get_embedder(), "embed", refuses)

    body = _search(api, "anchor").json()

    assert body["ranking"] == "text" and len(body["results"]) == 1


@pytest.mark.parametrize("path", ["postgresql", "sqlite"])
def test_only_the_searchable_version_of_a_document_is_read(api, org, path):
    settled = document_with_chunks(org, "settled.pdf", ["the buoy at the harbour mouth"])
    # A newer version embedded but not settled, and a document never settled at all.
    Document.objects.filter(id=settled.id).update(version=2)
    settled.refresh_from_db()
    embedder = get_embedder()
    document_chunks_upsert(
        document=settled,
        start=0,
        texts=["the anchor of the harbour"],
        vectors=[pack_vector(v) for v in embedder.embed(["the anchor of the harbour"])],
        model=embedder.name,
    )
    never = document_with_chunks(org, "never.pdf", ["the harbour anchor"])
    Document.objects.filter(id=never.id).update(searchable_version=None)

    if path == "postgresql":

        def search(words):
            return [hit["document_id"] for hit in _search(api, words).json()["results"]]
    else:  # the query the SQLite demo runs, here on PostgreSQL

        def search(words):
            return [
                str(c.document_id)
                for c in _candidates_by_substring(org.id, words.split(), [], None)
            ]

    assert search("harbour") == [str(settled.id)]
    assert search("buoy") == [str(settled.id)]
    assert search("anchor") == []


def test_a_search_of_one_document_finds_nothing_in_another(api, org, other_org):
    harbour = document_with_chunks(org, "harbour.pdf", ["the harbour pilot boards at dawn"])
    document_with_chunks(org, "pilots.pdf", ["a pilot of the harbour, twice over: harbour"])
    theirs = document_with_chunks(other_org, "theirs.pdf", ["the harbour pilot of another"])

    assert len(_search(api, "harbour pilot").json()["results"]) == 2
    [hit] = _search(api, "harbour pilot", document=str(harbour.id)).json()["results"]
    assert hit["document_id"] == str(harbour.id)
    # Another organisation's document is not searched, by its id or otherwise.
    assert _search(api, "harbour pilot", document=str(theirs.id)).json()["results"] == []


def test_results_are_paged_and_say_whether_more_follow(api, org):
    for n in range(4):
        document_with_chunks(org, f"tide-{n}.pdf", [f"tide table number {n}"])

    first = _search(api, "tide", limit=2).json()
    last = _search(api, "tide", limit=2, offset=2).json()

    names = [hit["filename"] for body in (first, last) for hit in body["results"]]
    assert sorted(names) == [f"tide-{n}.pdf" for n in range(4)]  # each once, none lost
    assert (first["more"], last["more"]) == (True, False)


def test_the_snippet_marks_the_words_of_the_query():
    text, marks = marked_snippet("Tides: the Tide rises; tidewater stays.", ["tide"])

    assert [text[start:end] for start, end in marks] == ["Tide"]
