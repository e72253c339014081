"""Bearer-token authentication for the API: a token acts for one organisation.

The header is read here rather than by django-ninja's HttpBearer.__call__, which with
DEBUG on logs a header of another scheme whole ("Basic pl_…"): nothing of the header
is ever logged, whatever its scheme."""

from ninja.security import HttpBearer

from documents.services.tokens import api_token_authenticate


class ApiTokenAuth(HttpBearer):
    def __call__(self, request):
        scheme, _, token = request.headers.get(self.header, "").partition(" ")
        if scheme.lower() != self.openapi_scheme:
            return None
        return self.authenticate(request, token)

    def authenticate(self, request, token: str):
        api_token = api_token_authenticate(raw=token)
        if api_token is None:
            return None
        request.api_token = api_token
        request.organisation = api_token.organisation
        return api_token
