"""GET /search: documents holding every word first, then those holding the most, one result
per document, only the caller's organisation's searchable versions, bounded in time; on
PostgreSQL through the chunks' stemmed text index."""

from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.provider_breaker import breaker
from documents.models import Document
from documents.services.content import document_chunks_upsert
from retrieval import text
from retrieval.embedding import PROVIDER, get_embedder, pack_vector
from retrieval.query import parse
from retrieval.search import MAX_QUERY_CHARS, _rank, marked_snippet, snippet
from tests.support.files import make_pdf
from tests.support.runs import document_with_chunks, drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


def _search(client, q: str, **params):
    return client.get("/api/v1/search", {"q": q, **params})


@pytest.mark.django_db(transaction=True)  # the stages commit, as in a worker
def test_it_finds_the_uploaded_documents_that_hold_the_words(api):
    glacier = accepted_run(api, make_pdf(2, label="Glacier moraine"), name="glacier.pdf")
    desert = accepted_run(api, make_pdf(1, label="Desert dune"), name="desert.pdf")
    for run in (glacier, desert):
        assert drive(run.id).status == "succeeded"

    body = _search(api, "moraines glacier").json()  # "moraines": stemmed to "moraine"

    assert body["ranking"] == "text"  # the hashing embedder's cosine does not rank
    [hit] = body["results"]
    assert hit["document_id"] == str(glacier.document_id)
    assert hit["filename"] == "glacier.pdf"
    assert hit["pages"] == 2
    assert "Glacier moraine" in hit["snippet"]
    assert hit["score"] == 1  # first by its text


def test_another_organisations_documents_are_never_found(api, org, other_org):
    document_with_chunks(org, "ours.pdf", ["the lighthouse keeper's log"])
    document_with_chunks(other_org, "theirs.pdf", ["the lighthouse keeper's secret"])

    results = _search(api, "lighthouse").json()["results"]

    assert [hit["filename"] for hit in results] == ["ours.pdf"]


def test_closer_chunks_rank_first_and_each_document_appears_once(api, org):
    tail = " ".join(["lorem ipsum dolor sit amet"] * 30)
    near = document_with_chunks(
        org, "near.pdf", [f"harbour {tail}", "harbour harbour harbour pilot"]
    )
    far = document_with_chunks(org, "far.pdf", [f"a harbour mentioned once among {tail}"])

    results = _search(api, "harbour").json()["results"]

    assert [hit["document_id"] for hit in results] == [str(near.id), str(far.id)]
    assert results[0]["chunk_index"] == 1  # near's best chunk, not its long first one
    assert results[0]["score"] > results[1]["score"]


def test_of_equal_chunks_the_earliest_is_the_result_whatever_their_ids(api, org):
    # Chunk ids are random: ranking ties by them sent the same search to a different page
    # of the same document from one upload to the next.
    texts = [f"part {n} of the harbour pilot's log" for n in range(8)]
    document = document_with_chunks(org, "log.pdf", texts)
    # Ids in the reverse of the chunks' order: the last chunk's is the least.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE documents_chunk SET id = ('00000000-0000-4000-8000-' || lpad("
            "(100 - index)::text, 12, '0'))::uuid WHERE document_id = %s",
            [document.id],
        )

    [hit] = _search(api, "harbour pilot").json()["results"]

    assert hit["chunk_index"] == 0


def test_documents_holding_every_word_come_first_then_those_holding_the_most(api, org):
    tail = " ".join(["lorem ipsum dolor sit amet"] * 30)
    # Every word, each in a long chunk of its own: the words count for the document.
    every = document_with_chunks(org, "every.pdf", [f"harbour {tail}", f"pilot's {tail}"])
    # One word, and the rarer, where it weighs most: a short chunk holding it thrice.
    strong = document_with_chunks(org, "strong.pdf", ["pilot pilot pilot"])
    document_with_chunks(org, "none.pdf", ["a quiet field"])
    common = [document_with_chunks(org, f"{n}.pdf", [f"the harbour {n}"]) for n in range(3)]

    results = _search(api, "harbour pilots").json()["results"]

    found = [hit["document_id"] for hit in results]
    assert found[:2] == [str(every.id), str(strong.id)]
    assert sorted(found[2:]) == sorted(str(d.id) for d in common)


def test_a_document_holds_a_common_word_even_where_its_first_matches_were_elsewhere(
    api, org, monkeypatch
):
    monkeypatch.setattr("retrieval.text.MATCHES_RANKED", 2)  # "harbour" is in more chunks than read
    for n in range(3):
        document_with_chunks(org, f"harbour-{n}.pdf", [f"the harbour wall {n}"])
    every = document_with_chunks(org, "every.pdf", ["the pilot boards", "at the harbour"])
    strong = document_with_chunks(org, "strong.pdf", ["pilot pilot"])

    results = _search(api, "harbour pilot").json()["results"]

    assert [hit["document_id"] for hit in results[:2]] == [str(every.id), str(strong.id)]


def test_documents_known_to_hold_every_word_are_not_read_again(api, org, monkeypatch):
    monkeypatch.setattr("retrieval.text.MATCHES_RANKED", 2)  # both words in more chunks than read
    for n in range(4):
        document_with_chunks(org, f"together-{n}.pdf", [f"the harbour pilot {n}"])

    with CaptureQueriesContext(connection) as queries:
        results = _search(api, "harbour pilot", limit=2).json()["results"]

    # The first documents hold both words in one chunk: which words they hold is known
    # from that chunk, and no document's chunks are read again to learn it (one holding
    # them apart still is: the test above).
    assert len(results) == 2
    assert not [q for q in queries if "bool_or(c.search_vector" in q["sql"]]


def test_a_rare_word_counts_more_than_a_common_one(api, org):
    for n in range(8):
        document_with_chunks(org, f"common-{n}.pdf", [f"the survey report number {n}"])
    rare = document_with_chunks(org, "rare.pdf", ["the bathymetry of the bay"])
    common = document_with_chunks(org, "common.pdf", ["survey survey survey and more"])

    results = _search(api, "survey bathymetry").json()["results"]

    # Neither holds both: the one holding the rare word first.
    assert [hit["document_id"] for hit in results[:2]] == [str(rare.id), str(common.id)]


def test_other_forms_of_a_word_match(api, org):
    alphabet = document_with_chunks(org, "alphabet.pdf", ["an alphabet of the sea"])
    document_with_chunks(org, "other.pdf", ["a table of tides"])

    for q in ("alphabets", "alphabet", "seas"):
        found = [hit["document_id"] for hit in _search(api, q).json()["results"]]
        assert found == [str(alphabet.id)], q


def test_apostrophes_and_hyphens_match_however_they_are_written(api, org):
    keeper = document_with_chunks(org, "keeper.pdf", ["the lighthouse keeper’s e-mail"])

    for q in ("keepers", "keeper's", "keeper’s", "e-mail", '"keepers e mail"'):
        found = [hit["document_id"] for hit in _search(api, q).json()["results"]]
        assert found == [str(keeper.id)], q


def test_one_long_document_does_not_hide_the_others(api, org, monkeypatch):
    monkeypatch.setattr("retrieval.search.CANDIDATES", 20)
    monkeypatch.setattr("retrieval.text.MATCHES_RANKED", 10)
    # Loaded first, with more chunks holding the word than the matches read of it.
    long = document_with_chunks(org, "long.pdf", ["tide tide tide table"] * 30)
    short = [document_with_chunks(org, f"{n}.pdf", [f"a tide came in {n}"]) for n in range(3)]

    for q in ("tide", "tide came"):
        results = _search(api, q).json()["results"]

        assert {hit["document_id"] for hit in results} == {str(d.id) for d in [long, *short]}, q
    assert _search(api, "tide").json()["results"][0]["document_id"] == str(long.id)


def test_a_minus_word_leaves_out_a_document_holding_it_in_any_chunk(api, org):
    document_with_chunks(org, "salt.pdf", ["the tide table for March", "salt water"])
    fresh = document_with_chunks(org, "fresh.pdf", ["a tide table of the river"])

    results = _search(api, "tide table -water").json()["results"]

    assert [hit["document_id"] for hit in results] == [str(fresh.id)]


def test_quoted_phrases_and_minus_words_narrow_the_search(api, org):
    document_with_chunks(org, "tide.pdf", ["the high tide table for March"])
    document_with_chunks(org, "table.pdf", ["a table of high and low water"])

    def found(q):
        return sorted(hit["filename"] for hit in _search(api, q).json()["results"])

    assert found("high table") == ["table.pdf", "tide.pdf"]
    assert found('"tide table"') == ["tide.pdf"]
    assert found("high table -tide") == ["table.pdf"]
    assert found("march or water") == ["table.pdf", "tide.pdf"]
    assert found("table or -tide") == ["table.pdf"]  # `or` before a -word is no operator
    assert found("the") == []  # a stop word alone: nothing to look for


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
    ],
)
def test_a_query_without_words_or_too_long_is_refused_clearly(api, q, status, code):
    response = _search(api, q)

    assert response.status_code == status
    assert response.json()["code"] == code


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("q", ["-tide", "-tide -chain", "or", '-"tide chain" OR'])
def test_a_query_of_only_left_out_words_finds_nothing(api, q):
    run = accepted_run(api, make_pdf(1, label="Tide chain beacon"), name="tide.pdf")
    assert drive(run.id).status == "succeeded"
    # Beside it, a query with a word: the document is there to find.
    assert len(_search(api, "beacon").json()["results"]) == 1

    for params in ({}, {"document": run.document_id}):
        response = _search(api, q, **params)
        assert response.status_code == 200, response.json()
        assert response.json()["results"] == []


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


def test_with_embeddings_fused_the_ranking_says_so(api, org, settings):
    settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS = "always"
    document_with_chunks(org, "kept.pdf", ["the anchor chain"])

    body = _search(api, "anchor").json()

    assert body["ranking"] == "embedding" and body["embedding_unavailable"] is False
    assert body["results"][0]["score"] == 1  # first by text and by embedding


def test_with_the_provider_paused_it_ranks_by_text_and_says_so(
    api, org, redis_conn, settings, monkeypatch
):
    monkeypatch.setattr("core.provider_breaker.PAUSE_AFTER_FAILURES", 1)
    settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS = "always"
    document_with_chunks(org, "kept.pdf", ["the anchor chain"])
    breaker(PROVIDER).failed()

    body = _search(api, "anchor").json()

    assert body["ranking"] == "text" and body["embedding_unavailable"] is True
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
    query = parse('"Tide table" or March -water keeper’s state-of-the-art or')

    assert query.clauses == (
        (("tide", "table"), ("march",)),
        (("keepers",),),
        (("state", "of", "the", "art"),),
    )
    assert query.excluded == (("water",),)
    assert query.words == ["tide", "table", "march", "keepers", "state", "of", "the", "art"]


def test_a_deleted_document_is_not_found_even_if_its_chunks_were_left(api, org):
    kept = document_with_chunks(org, "kept.pdf", ["the buoy"])
    gone = document_with_chunks(org, "gone.pdf", ["the buoy"])
    Document.objects.filter(id=gone.id).update(deleted_at=timezone.now())  # chunks left behind

    results = _search(api, "buoy").json()["results"]

    assert [hit["document_id"] for hit in results] == [str(kept.id)]


def test_a_common_word_is_read_in_many_documents_not_many_chunks_of_a_few(api, org, monkeypatch):
    monkeypatch.setattr("retrieval.text.MATCHES_RANKED", 6)
    documents = [document_with_chunks(org, "long.pdf", [f"the tern {n}" for n in range(10)])]
    documents += [
        document_with_chunks(org, f"{n}.pdf", [f"a tern {n}", f"the tern again {n}"])
        for n in range(5)
    ]  # 20 chunks hold the word, more than the 6 read

    results = _search(api, "tern", limit=10).json()["results"]

    assert {hit["document_id"] for hit in results} == {str(d.id) for d in documents}


def test_a_common_word_alone_finds_as_many_documents_as_its_matches_read(api, org, monkeypatch):
    monkeypatch.setattr("retrieval.text.MATCHES_RANKED", 8)
    monkeypatch.setattr(text, "_COMMON_SAMPLE", 2)  # a word beside others: 2
    documents = [
        document_with_chunks(org, f"{n}.pdf", [f"a tern {n}", f"the tern again {n}"])
        for n in range(8)
    ]

    first = _search(api, "tern", limit=5).json()
    last = _search(api, "tern", limit=5, offset=5).json()

    found = {hit["document_id"] for body in (first, last) for hit in body["results"]}
    assert found == {str(d.id) for d in documents}
    assert (first["more"], last["more"]) == (True, False)


def test_a_provider_failing_in_its_own_way_leaves_the_search_ranked_by_text(api, org, settings):
    settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS = "always"
    document_with_chunks(org, "kept.pdf", ["the anchor chain"])
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.OwnErrorEmbedder"

    body = _search(api, "anchor").json()

    assert body["ranking"] == "text" and len(body["results"]) == 1


def test_only_the_searchable_version_of_a_document_is_read(api, org):
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

    def search(words):
        return [hit["document_id"] for hit in _search(api, words).json()["results"]]

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
    # Another organisation's document is not searched, by its id or otherwise: to this
    # organisation it does not exist.
    refused = _search(api, "harbour pilot", document=str(theirs.id))
    assert (refused.status_code, refused.json()["code"]) == (404, "not_found")


def test_results_are_paged_and_say_whether_more_follow(api, org):
    for n in range(4):
        document_with_chunks(org, f"tide-{n}.pdf", [f"tide table number {n}"])

    first = _search(api, "tide", limit=2).json()
    last = _search(api, "tide", limit=2, offset=2).json()

    names = [hit["filename"] for body in (first, last) for hit in body["results"]]
    assert sorted(names) == [f"tide-{n}.pdf" for n in range(4)]  # each once, none lost
    assert (first["more"], last["more"]) == (True, False)


def test_the_snippet_is_around_the_word_when_lowering_lengthens_the_text():
    # "İ" lowered is two characters: 400 of them before the word moved the window past it.
    text = "İİİİİİİİ " * 50 + "the lighthouse keeper " + "and more words " * 40

    piece = snippet(text, ["lighthouse"])

    assert "lighthouse" in piece


def test_the_snippet_marks_the_words_of_the_query_as_stemmed():
    text, marks = marked_snippet("Tides: the Tide rises; tidewater stays.", ["tide"])

    assert [text[start:end] for start, end in marks] == ["Tides", "Tide"]
    text, marks = marked_snippet("An alphabet of letters, alpha first", ["alphabets"])
    assert [text[start:end] for start, end in marks] == ["alphabet"]


def test_rank_fuses_the_text_order_with_a_semantic_order_that_may_add_chunks():
    scores = _rank(["a", "b"], ["a", "c"])

    assert scores["a"] == 1  # first in both
    assert scores["b"] == scores["c"]  # second in one order each
    alone = _rank(["a", "b"], [])  # the text's order alone
    assert alone["a"] == 1 and alone["b"] == pytest.approx(61 / 62)
