"""Rows read by a statement written once (core/selects.py): the same instances the ORM
would give, related rows in place, on the real PostgreSQL."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.selects import RowSelect
from documents.models import ApiToken, Document
from documents.services.tokens import api_token_create

pytestmark = pytest.mark.django_db

TOKENS = RowSelect(ApiToken, related=("organisation",), where="t.id = %s")
DOCUMENTS = RowSelect(Document, related=("organisation",), where="t.id = %s")


def _values(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def test_a_row_and_its_related_row_read_as_the_orm_reads_them(org):
    token, _ = api_token_create(organisation=org, name="ci")
    token.last_used_at = timezone.now()
    token.save(update_fields=["last_used_at"])

    read = TOKENS.first([token.id])

    expected = ApiToken.objects.select_related("organisation").get(id=token.id)
    assert _values(read) == _values(expected)
    assert not read._state.adding and read._state.db == "default"
    with CaptureQueriesContext(connection) as queries:
        assert _values(read.organisation) == _values(expected.organisation)
    assert queries.captured_queries == []  # the organisation came with the token


def test_values_go_through_the_fields_converters(org):
    # A JSON field comes back from the database as text; its field makes it a list again.
    document = Document.objects.create(
        id=uuid.uuid4(),
        organisation=org,
        filename="a.pdf",
        kind="pdf",
        size_bytes=1,
        sha256="ab" * 32,
        storage_key="k/a.pdf",
        unreadable_pages=[3, 7],
        textless_pages=[1],
    )

    read = DOCUMENTS.first([document.id])

    assert read.unreadable_pages == [3, 7] and read.textless_pages == [1]
    assert _values(read) == _values(Document.objects.get(id=document.id))


def test_no_row_is_none(org):
    assert TOKENS.first([10**9]) is None
