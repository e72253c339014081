"""The organisations admin: the quota bar, the ledger, the tokens, the page limit (never
below what is used and held), times with seconds, and staff only. The record and
connection lists: their work does not grow with the table or the page."""

import re
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction

from documents.models import ApiToken, Document, Organisation, UsageEntry
from documents.services.quota import quota_settle
from documents.services.removal import document_mark_deleted
from documents.services.tokens import api_token_create, api_token_revoke
from operations.admin.listing import BoundedCountPaginator
from tests.support.admin import make_connections, make_records, page_queries
from tests.support.files import make_pdf
from tests.support.pages import page_text
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/documents/organisation/"


def _page(org) -> str:
    return f"{CHANGELIST}{org.id}/change/"


def _change(client, org, **fields):
    form = {
        "slug": org.slug,
        "name": org.name,
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        **fields,
    }
    return client.post(_page(org), form)


def _charge(api, pages: int):
    """An upload whose pages are charged to the ledger (as the settle stage does)."""
    run = accepted_run(api, make_pdf(pages))
    quota_settle(reservation=run.reservation, document=run.document, pages=pages)
    return run


def _ledger_rows(org, count: int) -> None:
    for i in range(count):
        document = Document.objects.create(
            organisation=org,
            filename=f"ledger-{i:02}.pdf",
            kind="pdf",
            size_bytes=1,
            sha256="0" * 64,
            storage_key=f"test/{org.slug}/{i}",
        )
        UsageEntry.objects.create(organisation=org, document=document, document_version=1, pages=1)


def test_a_page_limit_below_the_pages_held_is_refused_with_the_reason(operator, org, api):
    accepted_run(api, make_pdf(2))

    refused = _change(operator, org, page_limit="1")

    assert refused.status_code == 200
    assert "cannot go below the 2 pages" in refused.content.decode()
    org.refresh_from_db()
    assert org.page_limit == 1000


def test_an_operator_changes_the_name_and_limit_without_touching_the_totals(operator, org, api):
    accepted_run(api, make_pdf(2))

    changed = _change(operator, org, name="Acme Ltd", page_limit="500")

    assert changed.status_code == 302
    org.refresh_from_db()
    assert (org.name, org.page_limit, org.pages_reserved) == ("Acme Ltd", 500, 2)


def test_the_quota_bar_shows_used_reserved_and_available_of_the_limit(operator, org, api):
    _charge(api, 4)
    accepted_run(api, make_pdf(2))

    page = operator.get(_page(org))

    assert page.status_code == 200
    assert "4 used, 2 reserved, 994 available of 1000 pages" in page_text(page)
    # The bar is drawn to scale: 4 and 2 pages of 1000.
    assert 'data-part="used" x="0" width="0.4"' in page.content.decode()
    assert 'data-part="reserved" x="0.4" width="0.2"' in page.content.decode()


def test_the_list_shows_each_organisations_quota_as_a_compact_bar(operator, org, other_org, api):
    accepted_run(api, make_pdf(3))

    listing = operator.get(CHANGELIST)

    assert listing.status_code == 200
    content = listing.content.decode()
    assert 'title="0 used, 3 reserved, 997 available of 1000 pages"' in content
    assert 'title="0 used, 0 reserved, 1000 available of 1000 pages"' in content
    assert 'data-part="reserved" x="0.0" width="0.3"' in content


def test_the_ledger_entries_appear_with_a_link_to_all_of_them(operator, org, other_org, api):
    run = _charge(api, 3)
    _ledger_rows(other_org, 1)

    page = operator.get(_page(org))

    text = page_text(page)
    entry = UsageEntry.objects.get(organisation=org)
    assert f"{run.document.filename} 1 3 " in text
    assert "ledger-00.pdf" not in text
    assert f'href="/admin/documents/document/{run.document.id}/change/"' in page.content.decode()
    everything = re.search(r'href="([^"]+)">All 1 ledger entries', page.content.decode())
    assert everything, "the ledger links to all of the organisation's entries"
    listed = operator.get(everything.group(1).replace("&amp;", "&"))
    assert listed.status_code == 200
    assert f"/admin/documents/usageentry/{entry.id}/change/" in listed.content.decode()
    assert "ledger-00.pdf" not in page_text(listed)


def test_the_ledger_shows_only_the_newest_entries(operator, org):
    _ledger_rows(org, 25)

    text = page_text(operator.get(_page(org)))

    assert "The newest 20 of 25 charges. All 25 ledger entries" in text
    assert "ledger-24.pdf" in text and "ledger-05.pdf" in text
    assert "ledger-04.pdf" not in text


def test_the_organisations_tokens_are_listed_with_links_to_create_and_revoke(
    operator, org, other_org
):
    live, _ = api_token_create(organisation=org, name="billing sync")
    gone, _ = api_token_create(organisation=org, name="old import")
    api_token_revoke(token=gone)
    theirs, _ = api_token_create(organisation=other_org, name="globex bot")

    page = operator.get(_page(org))

    content, text = page.content.decode(), page_text(page)
    assert f"{live.prefix}… billing sync" in text and f"{gone.prefix}… old import" in text
    assert theirs.prefix not in content
    assert f'href="/admin/documents/apitoken/add/?organisation={org.id}"' in content
    assert f'href="/admin/documents/apitoken/{live.id}/revoke/"' in content
    assert f"/admin/documents/apitoken/{gone.id}/revoke/" not in content
    # The tokens are listed, not editable here: the form has no field of theirs.
    assert 'name="api_tokens-TOTAL_FORMS"' not in content
    assert "All 2 tokens" in text


def test_times_on_the_organisation_page_have_seconds_in_the_site_time_zone(
    site_formats, operator, org
):
    _ledger_rows(org, 1)
    token, _ = api_token_create(organisation=org, name="ci")
    moment = datetime(2025, 3, 4, 10, 20, 30, tzinfo=UTC)
    UsageEntry.objects.filter(organisation=org).update(created_at=moment)
    ApiToken.objects.filter(id=token.id).update(created_at=moment)

    text = page_text(operator.get(_page(org)))

    # 10:20:30 UTC is 16:05:30 in Kathmandu (UTC+05:45).
    assert "ledger-00.pdf 1 1 4 Mar 2025, 16:05:30" in text
    assert f"{token.prefix}… ci 4 Mar 2025, 16:05:30 never" in text


def test_the_organisation_list_shows_times_with_seconds(site_formats, operator, org):
    Organisation.objects.filter(id=org.id).update(
        created_at=datetime(2025, 3, 4, 23, 59, 59, tzinfo=UTC)
    )

    assert "5 Mar 2025, 05:44:59" in page_text(operator.get(CHANGELIST))


def test_a_member_who_is_not_staff_sees_no_organisation_page(member_client, org, api):
    _charge(api, 2)
    urls = [
        CHANGELIST,
        _page(org),
        f"{CHANGELIST}add/",
        f"/admin/documents/usageentry/?organisation__id__exact={org.id}",
    ]

    for url in urls:
        response = member_client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/admin/login/"), url

    refused = _change(member_client, org, name="Taken over", page_limit="5000")
    assert refused.status_code == 302 and refused["Location"].startswith("/admin/login/")
    org.refresh_from_db()
    assert (org.name, org.page_limit) == ("Acme", 1000)


# --- The record and connection lists on big tables --------------------------------------

DOCUMENTS = "/admin/documents/document/"
RESERVATIONS = "/admin/documents/quotareservation/"
LEDGER = "/admin/documents/usageentry/"
CHUNKS = "/admin/documents/chunk/"
TOKENS = "/admin/documents/apitoken/"
CONNECTIONS = "/admin/connectors/connection/"
IMPORTS = "/admin/connectors/connectorimport/"
RECORD_LISTS = [DOCUMENTS, RESERVATIONS, LEDGER, CHUNKS]
DOCUMENT_LINK = re.compile(r'href="/admin/documents/document/([0-9a-f-]{36})/change/')
IMPORT_LINK = re.compile(r'href="/admin/connectors/connectorimport/(\d+)/change/')


def test_the_record_lists_make_the_same_queries_for_5_or_40_rows(operator, org):
    make_records(org, 5)
    few = {url: len(page_queries(operator, url)) for url in RECORD_LISTS}

    make_records(org, 35, name="more")
    many = {url: len(page_queries(operator, url)) for url in RECORD_LISTS}

    assert few == many


def test_the_connection_lists_make_the_same_queries_for_3_or_30_connections(
    operator, org, other_org
):
    make_connections(org, 2)
    make_connections(other_org, 1)
    urls = [CONNECTIONS, IMPORTS, f"{IMPORTS}?state__exact=queued"]
    few = {url: len(page_queries(operator, url)) for url in urls}

    make_connections(org, 14)
    make_connections(other_org, 13)
    many = {url: len(page_queries(operator, url)) for url in urls}

    assert few == many


def test_the_lists_never_count_a_whole_table(operator, org):
    make_records(org, 3)
    make_connections(org, 2)
    urls = [
        *RECORD_LISTS,
        CONNECTIONS,
        IMPORTS,
        f"{DOCUMENTS}?kind__exact=pdf",
        f"{RESERVATIONS}?status__exact=released",
        f"{LEDGER}?organisation__id__exact={org.id}",
        f"{CHUNKS}?q=x",
        f"{CONNECTIONS}?status__exact=active",
        f"{IMPORTS}?state__exact=queued",
    ]

    for url in urls:
        counts = [sql for sql in page_queries(operator, url) if "COUNT(" in sql]
        # Counted only up to a cap: the count reads at most that many keys.
        assert counts and all("LIMIT" in sql for sql in counts), (url, counts)


def test_the_filters_list_organisations_and_connections_only_while_they_are_few(
    operator, org, other_org
):
    make_records(org, 1)
    make_connections(org, 1)
    theirs = make_connections(other_org, 1)[0]
    few = {url: operator.get(url).content.decode() for url in [*RECORD_LISTS[:3], CONNECTIONS]}
    few_imports = operator.get(IMPORTS).content.decode()

    Organisation.objects.bulk_create(
        Organisation(slug=f"org-{n:02}", name=f"Org {n}", page_limit=10) for n in range(60)
    )
    make_connections(org, 60)

    for url, page in few.items():
        assert f"?organisation__id__exact={other_org.id}" in page, url
        many = operator.get(url).content.decode()
        assert "organisation__id__exact" not in many, url
        chosen = operator.get(f"{url}?organisation__id__exact={other_org.id}")
        assert chosen.status_code == 200, url
        assert f"?organisation__id__exact={other_org.id}" in chosen.content.decode(), url
        assert "org-00" not in chosen.content.decode(), url
    assert f"?connection__id__exact={theirs.id}" in few_imports
    assert "connection__id__exact" not in operator.get(IMPORTS).content.decode()
    chosen = operator.get(f"{IMPORTS}?connection__id__exact={theirs.id}").content.decode()
    assert len(IMPORT_LINK.findall(chosen)) == 1
    assert f"?connection__id__exact={theirs.id}" in chosen
    # One that does not exist lists nothing rather than everything.
    nothing = operator.get(f"{IMPORTS}?connection__id__exact=999999").content.decode()
    assert IMPORT_LINK.findall(nothing) == []


def test_a_filter_given_an_id_of_other_digits_than_ascii_lists_nothing(operator, org):
    make_records(org, 1)
    Organisation.objects.bulk_create(
        Organisation(slug=f"org-{n:02}", name=f"Org {n}", page_limit=10) for n in range(60)
    )

    for value in ["²", "١", "9" * 5000]:  # superscript two, Arabic-Indic one
        for url in [*RECORD_LISTS[:3], IMPORTS]:
            filtered = "connection" if url == IMPORTS else "organisation"
            page = operator.get(f"{url}?{filtered}__id__exact={value}")
            assert page.status_code == 200, (url, value)
            assert not DOCUMENT_LINK.findall(page.content.decode()), (url, value)


def test_documents_are_found_by_whole_id_or_hash_exactly_and_by_their_name(operator, org):
    make_records(org, 3, name="invoice")
    document = Document.objects.get(filename="invoice-1.pdf")

    def found(term: str) -> set[str]:
        response = operator.get(DOCUMENTS, {"q": term})
        assert response.status_code == 200
        return set(DOCUMENT_LINK.findall(response.content.decode()))

    assert found(str(document.id)) == {str(document.id)}
    assert found(document.sha256) == {str(document.id)}
    assert found(document.sha256.upper()) == {str(document.id)}
    assert found("voice-1") == {str(document.id)}
    assert len(found("invoice")) == 3
    assert found(str(document.id)[:8]) == set()
    assert found(document.sha256[:20]) == set()


def test_a_whole_hash_is_found_through_its_index_not_by_reading_the_table(org):
    make_records(org, 1, name="invoice")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # as on a table too large to read
        plan = Document.objects.filter(sha256="0" * 64).explain()

    assert "document_sha256" in plan


def test_deleted_documents_are_listed_with_when_and_by_whom_read_only(operator, org):
    make_records(org, 2, name="kept")
    make_records(org, 1, name="gone")
    gone = Document.objects.get(filename="gone-0.pdf")
    document_mark_deleted(document=gone, deleted_by="user:alice")

    deleted_only = operator.get(DOCUMENTS, {"deleted_at__isempty": "0"}).content.decode()
    page = operator.get(f"{DOCUMENTS}{gone.id}/change/")

    assert DOCUMENT_LINK.findall(deleted_only) == [str(gone.id)]
    assert "Deleted at" in deleted_only
    text = page_text(page)
    assert "Deleted at:" in text and "Deleted by: user:alice" in text
    assert 'name="deleted_at"' not in page.content.decode()


def test_a_document_search_reads_keys_and_names_never_ids_or_hashes_as_text(operator, org):
    make_records(org, 1, name="invoice")
    document = Document.objects.get()

    def searches(term: str) -> list[str]:
        sqls = page_queries(operator, f"{DOCUMENTS}?q={term}")
        return [sql for sql in sqls if 'FROM "documents_document"' in sql and "WHERE" in sql]

    by_id, by_name = searches(str(document.id)), searches("invoice")

    assert by_id and not any("LIKE" in sql for sql in by_id)
    assert any(f'"documents_document"."id" = \'{document.id.hex}\'::uuid' in sql for sql in by_id)
    assert by_name and all("LIKE" in sql for sql in by_name)
    assert not any('"id"::text' in sql or '"sha256"' in sql.split("WHERE")[1] for sql in by_name)


def test_the_connection_lists_leave_each_cursor_in_the_database(operator, org):
    make_connections(org, 2, cursor="x" * 1_000_000)

    for url in [CONNECTIONS, IMPORTS]:
        sqls = page_queries(operator, url)
        assert not any('"documents_connection"."cursor"' in sql for sql in sqls), url


def test_the_domains_lists_say_when_their_count_is_capped(operator, org, monkeypatch):
    monkeypatch.setattr(BoundedCountPaginator, "COUNT_CAP", 5)
    make_records(org, 8)

    page = operator.get(f"/admin/documents/document/?organisation__id__exact={org.id}")

    assert re.search(r"5\+\s+documents", page.content.decode())


def test_the_document_list_shows_pages_without_text_and_filters_by_what_read_them(operator, org):
    make_records(org, 3)
    scan, pdf, damaged = Document.objects.filter(organisation=org).order_by("filename")
    Document.objects.filter(id=scan.id).update(
        page_count=40, textless_pages=list(range(1, 13)), text_engine="pdfium"
    )
    Document.objects.filter(id=pdf.id).update(page_count=2, text_engine="pdfium")
    Document.objects.filter(id=damaged.id).update(page_count=5, text_engine="pypdf")

    listed = operator.get(DOCUMENTS)
    by_pypdf = operator.get(f"{DOCUMENTS}?text_engine__exact=pypdf").content.decode()

    assert "12 of 40" in page_text(listed) and "PDFium" in page_text(listed)
    assert "?text_engine__exact=pypdf" in listed.content.decode()  # the filter offered
    assert set(DOCUMENT_LINK.findall(by_pypdf)) == {str(damaged.id)}
