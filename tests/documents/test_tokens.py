"""API tokens: bearer authentication, revocation, stored hashed."""

import hashlib

import pytest
from django.test import Client

from documents.models import ApiToken
from documents.services.tokens import api_token_create, api_token_revoke

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "header", [None, "Bearer", "Bearer nope", "Token pl_abc", "Bearer pl_" + "x" * 43]
)
def test_missing_or_bad_tokens_get_401(header, org):
    client = Client(HTTP_AUTHORIZATION=header) if header else Client()

    response = client.get("/api/v1/quota")

    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"


def test_a_revoked_token_gets_401(org):
    token, raw = api_token_create(organisation=org)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/quota").status_code == 200

    api_token_revoke(token=token)

    assert client.get("/api/v1/quota").status_code == 401


def test_tokens_are_stored_hashed_and_note_their_last_use(org):
    token, raw = api_token_create(organisation=org)
    secret = raw[len(token.prefix) :]

    stored = ApiToken.objects.filter(id=token.id).values().get()
    assert stored["token_hash"] == hashlib.sha256(raw.encode()).hexdigest()
    assert not any(secret in str(value) for value in stored.values())
    assert raw.startswith(token.prefix) and stored["last_used_at"] is None
    # The stored hash is no credential: presenting it is refused.
    hash_as_token = Client(HTTP_AUTHORIZATION=f"Bearer pl_{stored['token_hash']}")
    assert hash_as_token.get("/api/v1/quota").status_code == 401

    assert Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/v1/quota").status_code == 200

    assert ApiToken.objects.get(id=token.id).last_used_at is not None
