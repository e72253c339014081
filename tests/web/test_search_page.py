"""The search page: members find their organisation's documents by their words."""

import pytest

from tests.support.runs import document_with_chunks

pytestmark = pytest.mark.django_db


def test_the_search_page_needs_a_login(client):
    response = client.get("/search/", {"q": "x"})

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_a_member_finds_their_documents_with_a_snippet(member_client, org, other_org):
    document_with_chunks(org, "minutes.pdf", ["the harbour board met on Tuesday"])
    document_with_chunks(other_org, "secret.pdf", ["the harbour board's secret"])

    response = member_client.get("/search/", {"q": "harbour board"})

    page = response.content.decode()
    assert response.status_code == 200
    assert "1 document found" in page
    assert "minutes.pdf" in page and "the harbour board met on Tuesday" in page
    assert "secret.pdf" not in page


def test_the_page_says_when_nothing_matches_and_shows_no_results_before_a_search(
    member_client, org
):
    document_with_chunks(org, "minutes.pdf", ["the harbour board"])

    empty = member_client.get("/search/").content.decode()
    nothing = member_client.get("/search/", {"q": "lighthouse"}).content.decode()

    assert "found" not in empty and 'name="q"' in empty
    assert "0 documents found" in nothing and "Nothing holds every word" in nothing


def test_a_query_it_refuses_is_a_plain_message(member_client):
    response = member_client.get("/search/", {"q": "?!"})

    assert response.status_code == 400
    assert "Send the words to search for" in response.content.decode()
