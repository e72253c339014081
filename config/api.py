"""The one NinjaAPI. Each app adds its router; domain errors are rendered here."""

from ninja import NinjaAPI

from core.errors import ServiceError
from documents.api import router as documents_router
from documents.auth import ApiTokenAuth
from jobs.api import router as jobs_router

api = NinjaAPI(
    title="Paperlane API",
    version="1",
    description="Upload PDF and DOCX documents, follow their processing, read your quota.",
    auth=ApiTokenAuth(),
    urls_namespace="api",
)
api.add_router("", jobs_router)
api.add_router("", documents_router)


@api.exception_handler(ServiceError)
def service_error(request, exc: ServiceError):
    response = api.create_response(request, exc.as_dict(), status=exc.status_code)
    for header, value in exc.headers().items():
        response[header] = value
    return response
