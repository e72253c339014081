"""Revoking tokens: once, keeping the first time, reporting only what this call revoked."""

import pytest

from documents.models import ApiToken
from documents.services.tokens import api_token_create, api_token_revoke, api_tokens_revoke

pytestmark = pytest.mark.django_db


def test_revoking_reports_only_the_tokens_this_call_revoked(org):
    live, _ = api_token_create(organisation=org, name="live")
    gone, _ = api_token_create(organisation=org, name="gone")
    first = api_token_revoke(token=gone).revoked_at

    revoked = api_tokens_revoke(tokens=[live, gone])
    again = api_tokens_revoke(tokens=[live, gone])

    assert [token.id for token in revoked] == [live.id] and again == []
    assert revoked[0].revoked_at == ApiToken.objects.get(id=live.id).revoked_at
    assert ApiToken.objects.get(id=gone.id).revoked_at == first
