"""API: the organisation's quota. Thin callers of services and selectors."""

from ninja import Router

from documents.schemas import QuotaOut
from documents.services.quota import quota_get

router = Router(tags=["quota"])


@router.get("/quota", response=QuotaOut, url_name="quota_get")
def quota(request):
    snapshot = quota_get(organisation_id=request.organisation.id)
    return {
        "page_limit": snapshot.page_limit,
        "pages_used": snapshot.pages_used,
        "pages_reserved": snapshot.pages_reserved,
        "pages_available": snapshot.pages_available,
    }
