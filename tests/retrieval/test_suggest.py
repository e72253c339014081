"""Did you mean: a word no document of the organisation holds is replaced by the nearest
one its documents do, from its own vocabulary, kept as documents become searchable and
leave search; never another organisation's word."""

import io
import random

import pytest
from django.core.management import call_command

from documents.models import Document, SearchWord, VocabularyChange
from documents.services.content import (
    document_chunks_upsert,
    document_make_searchable,
    document_mark_source_deleted,
)
from documents.services.removal import document_mark_deleted
from documents.services.vocabulary import vocabulary_apply
from pipeline.sweeper import sweep_once
from retrieval.embedding import get_embedder, pack_vector
from retrieval.search import documents_search
from retrieval.suggest import edit_distance, rewritten
from tests.support.known_items import real_world_chunks
from tests.support.real_world import FOLDER
from tests.support.runs import document_with_chunks, drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


def _search(client, q: str, **params):
    return client.get("/api/v1/search", {"q": q, **params}).json()


def _vocabulary(organisation) -> dict[str, int]:
    """The organisation's words and their counts, once the sweeper has counted them."""
    vocabulary_apply()
    return dict(
        SearchWord.objects.filter(organisation=organisation).values_list("word", "documents")
    )


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("vicksburg", "vicksburg", 0),
        ("vicksberg", "vicksburg", 1),  # a letter changed
        ("vicksbrg", "vicksburg", 1),  # one dropped
        ("vicksbuurg", "vicksburg", 1),  # one added
        ("vikcsburg", "vicksburg", 1),  # two swapped
        ("toponmy", "toponymy", 1),
        ("harbuor", "harbour", 1),
        ("habruor", "harbour", 2),
        ("", "abc", 3),
        ("glacier", "desert", 6),
    ],
)
def test_edit_distance_counts_a_swap_as_one_edit(a, b, distance):
    assert edit_distance(a, b) == distance
    assert edit_distance(b, a) == distance


def test_the_query_is_rewritten_in_the_case_it_was_typed():
    replacements = {"vicksberg": "vicksburg", "toponmy": "toponymy"}
    assert rewritten('"Siege of Vicksberg" -toponmy', replacements) == (
        '"Siege of Vicksburg" -toponymy'
    )
    assert rewritten("VICKSBERG or toponmy", replacements) == "VICKSBURG or toponymy"
    assert rewritten("nothing here", replacements) == "nothing here"


@pytest.mark.django_db(transaction=True)  # the stages commit, as in a worker
@pytest.mark.parametrize("typed", ["vicksberg", "vicksbrg", "vikcsburg", "Vicksbugr"])
def test_a_typo_of_a_word_in_a_real_scan_suggests_it_and_the_suggestion_finds_it(api, typed):
    data = (FOLDER / "Seige_of_Vicksburg_Sample_OCR.pdf").read_bytes()
    run = accepted_run(api, data, name="vicksburg.pdf")
    assert drive(run.id).status == "succeeded"
    vocabulary_apply()

    typo = _search(api, f"siege {typed}")

    assert typo["suggestion"] == ("siege Vicksburg" if typed[0] == "V" else "siege vicksburg")
    followed = _search(api, typo["suggestion"])
    assert [hit["document_id"] for hit in followed["results"]] == [str(run.document_id)]
    assert followed["suggestion"] is None  # every word held: nothing to suggest


def test_a_word_held_by_some_document_is_never_corrected(api, org):
    document_with_chunks(org, "harbour.pdf", ["the harbour pilot boards at dawn"])
    document_with_chunks(org, "harbor.pdf", ["the harbor master"])
    vocabulary_apply()

    assert _search(api, "harbor")["suggestion"] is None
    assert _search(api, "harbour pilots")["suggestion"] is None  # "pilots": a form of "pilot"
    assert _search(api, "harbour pilto")["suggestion"] == "harbour pilot"


def test_a_word_found_through_another_finds_its_suggestion(api, org):
    document = document_with_chunks(org, "names.pdf", ["a toponymy model of place names"])
    document_with_chunks(org, "cars.pdf", ["the model of a car"])
    vocabulary_apply()

    body = _search(api, "toponmy model")

    assert len(body["results"]) == 2  # both through "model"
    assert body["suggestion"] == "toponymy model"
    assert _search(api, body["suggestion"])["results"][0]["document_id"] == str(document.id)


def test_a_suggestion_never_names_a_word_only_another_organisation_holds(
    api, other_api, org, other_org
):
    document_with_chunks(other_org, "theirs.pdf", ["zanzibar cloves"])
    document_with_chunks(org, "ours.pdf", ["zanzibra is spelt so here"])
    vocabulary_apply()

    # As near to each: one letter added.
    assert _search(api, "zanzibr")["suggestion"] == "zanzibra"
    assert _search(other_api, "zanzibr")["suggestion"] == "zanzibar"
    assert _search(api, "clovse")["suggestion"] is None


def test_stop_words_and_far_words_are_not_suggested(api, org):
    document_with_chunks(org, "a.pdf", ["these are their words about lighthouses"])
    vocabulary_apply()

    assert _search(api, "thier")["suggestion"] is None  # "their": a stop word finds nothing
    assert _search(api, "xylophone")["suggestion"] is None
    assert _search(api, "lighthuoses")["suggestion"] == "lighthouses"


def test_searching_one_document_suggests_when_nothing_is_found(api, org):
    document = document_with_chunks(org, "a.pdf", ["the lighthouse keeper's log"])
    vocabulary_apply()

    body = _search(api, "lighthuose", document=str(document.id))

    assert body["total"] == 0
    assert body["suggestion"] == "lighthouse"


def _settle(document: Document, texts: list[str]) -> None:
    document.version += 1
    document.save(update_fields=["version"])
    embedder = get_embedder()
    document_chunks_upsert(
        document=document,
        start=0,
        texts=texts,
        vectors=[pack_vector(v) for v in embedder.embed(texts)],
        model=embedder.name,
    )
    document_make_searchable(document=document)


def test_the_vocabulary_follows_versions_and_deletion(org, other_org):
    first = document_with_chunks(org, "a.pdf", ["glacier moraine", "moraine drumlin"])
    second = document_with_chunks(org, "b.pdf", ["glacier ice"])
    document_with_chunks(other_org, "c.pdf", ["glacier"])
    assert _vocabulary(org) == {"glacier": 2, "moraine": 1, "drumlin": 1, "ice": 1}

    document_make_searchable(document=first)  # the same version again: nothing changes
    assert _vocabulary(org) == {"glacier": 2, "moraine": 1, "drumlin": 1, "ice": 1}

    _settle(first, ["desert dune", "glacier"])  # a new version in its place
    assert _vocabulary(org) == {"glacier": 2, "desert": 1, "dune": 1, "ice": 1}

    document_mark_deleted(document=second, deleted_by="test")
    assert _vocabulary(org) == {"glacier": 1, "desert": 1, "dune": 1}

    # Its connected file deleted at the source, and its chunks taken out of search.
    document_mark_source_deleted(document_ids=[first.id], remove_chunks=True)
    assert _vocabulary(org) == {}
    assert _vocabulary(other_org) == {"glacier": 1}


def test_typos_of_real_documents_words_are_corrected(org, corpus):
    """Each real-world fixture's own words, typed with one mistake (a letter changed,
    dropped, added, or two swapped), seeded: most come back as the word, and none comes
    back as a word no document holds."""
    for key, chunks in corpus.items():
        document_with_chunks(org, key, chunks)
    vocabulary = _vocabulary(org)
    words = sorted(w for w in vocabulary if len(w) >= 6)
    chooser = random.Random(37)
    sample = chooser.sample(words, 120)
    right = 0
    for word in sample:
        typo = _typo(word, chooser)
        if typo in vocabulary:
            continue  # a typo that is another real word: nothing to correct
        suggestion = documents_search(organisation=org, query=typo).suggestion
        assert suggestion is None or suggestion in vocabulary
        right += suggestion == word
    print(f"\n{right} of {len(sample)} typos corrected to the word typed")
    assert right >= 0.8 * len(sample)


def test_the_vocabulary_is_counted_again_from_the_searchable_documents(org, other_org):
    document_with_chunks(org, "a.pdf", ["glacier moraine"])
    gone = document_with_chunks(org, "b.pdf", ["glacier drumlin"])
    document_mark_deleted(document=gone, deleted_by="test")
    document_with_chunks(other_org, "c.pdf", ["glacier"])
    counted = {org: _vocabulary(org), other_org: _vocabulary(other_org)}
    SearchWord.objects.all().delete()  # as after chunks loaded in bulk
    document_with_chunks(org, "d.pdf", ["glacier"])  # a change not yet counted

    out = io.StringIO()
    call_command("search_index", "--vocabulary", stdout=out)

    assert "vocabulary counted again: 3 words" in out.getvalue()
    assert _vocabulary(org) == {**counted[org], "glacier": 2}
    assert _vocabulary(other_org) == counted[other_org]


def test_a_leaving_counted_before_its_coming_is_held_until_the_coming_is_counted(org):
    # Two sweepers at once may count a document's leaving first.
    VocabularyChange.objects.create(organisation=org, added=[], removed=["glacier"])
    assert _vocabulary(org) == {"glacier": -1}
    VocabularyChange.objects.create(organisation=org, added=["glacier"], removed=[])
    assert _vocabulary(org) == {}
    assert not VocabularyChange.objects.exists()


def test_the_sweeper_counts_many_documents_words_in_one_pass(org):
    for n in range(30):
        document_with_chunks(org, f"{n}.pdf", [f"harbour pilot number{'x' * (n % 3)}"])
    assert VocabularyChange.objects.count() == 30

    assert sweep_once().vocabulary_changes == 30
    assert _vocabulary(org) == {
        "harbour": 30,
        "pilot": 30,
        "number": 10,
        "numberx": 10,
        "numberxx": 10,
    }


@pytest.fixture(scope="module")
def corpus():
    return real_world_chunks()


def _typo(word: str, chooser: random.Random) -> str:
    at = chooser.randrange(1, len(word) - 1)
    kind = chooser.choice(["change", "drop", "add", "swap"])
    letter = chooser.choice("abcdefghijklmnopqrstuvwxyz")
    if kind == "change":
        return word[:at] + letter + word[at + 1 :]
    if kind == "drop":
        return word[:at] + word[at + 1 :]
    if kind == "add":
        return word[:at] + letter + word[at:]
    return word[:at] + word[at + 1] + word[at] + word[at + 2 :]
