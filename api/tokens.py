"""API: the organisation's quota and API tokens. Thin callers of services and selectors."""

from ninja import Path, Query, Router

from api.errors import errors
from api.params import PAGE_LIMIT, PAGE_OFFSET
from api.responses import no_content
from api.schemas import QuotaOut, TokenPage
from documents.models import ApiToken
from documents.roles import Ability, ability_require
from documents.selectors import api_token_get, api_token_list
from documents.services.quota import quota_get
from documents.services.tokens import api_tokens_revoke

router = Router(tags=["organisation"])


@router.get(
    "/quota",
    response={200: QuotaOut, **errors()},
    url_name="quota_get",
    operation_id="quota_get",
    summary="The organisation's page quota",
)
def quota(request):
    """Pages the organisation may process, has been charged for, holds for documents in
    processing, and has left."""
    snapshot = quota_get(organisation_id=request.organisation.id)
    return {
        "page_limit": snapshot.page_limit,
        "pages_used": snapshot.pages_used,
        "pages_reserved": snapshot.pages_reserved,
        "pages_available": snapshot.pages_available,
    }


def _token_out(token: ApiToken, request) -> dict:
    return {
        "id": token.id,
        "name": token.name,
        "role": token.role,
        "prefix": token.prefix,
        "created_at": token.created_at,
        "last_used_at": token.last_used_at,
        "revoked_at": token.revoked_at,
        "active": token.is_active,
        "current": token.id == request.api_token.id,
    }


@router.get(
    "/tokens",
    response={200: TokenPage, **errors(403, 422)},
    url_name="token_list",
    operation_id="tokens_list",
    summary="List the organisation's API tokens",
)
def tokens_list(
    request,
    limit: int = PAGE_LIMIT,
    offset: int = PAGE_OFFSET,
    active: bool | None = Query(
        None, description="Only the active (true) or only the revoked (false) tokens."
    ),
):
    """The organisation's API tokens, newest first, revoked ones included unless
    `active=true`; `current` marks the one this request was made with. Secrets are
    never shown again. Takes an admin's token (`403` otherwise)."""
    ability_require(
        organisation_id=request.organisation.id,
        ability=Ability.TOKENS,
        api_token=request.api_token,
    )
    tokens = api_token_list(organisation=request.organisation, active=active)
    return {
        "items": [_token_out(token, request) for token in tokens[offset : offset + limit]],
        "count": tokens.count(),
        "limit": limit,
        "offset": offset,
    }


@router.delete(
    "/tokens/{token_id}",
    response={204: None, **errors(403, 404, 422)},
    url_name="token_revoke",
    operation_id="tokens_revoke",
    summary="Revoke an API token",
)
def tokens_revoke(
    request, token_id: int = Path(..., ge=1, le=2**63 - 1, description="The token's id.")
):
    """Revoke one of the organisation's tokens, at once and for good; the token this
    request uses too. Revoking a revoked token is a `204` that changes nothing (the
    first revocation is kept); a token of another organisation is a `404`. Any token may
    revoke itself; revoking another takes an admin's token (`403` otherwise)."""
    token = api_token_get(organisation=request.organisation, token_id=token_id)
    api_tokens_revoke(tokens=[token], revoked_by_token=request.api_token)
    return no_content()
