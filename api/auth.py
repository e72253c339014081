"""Bearer-token authentication for the API: a token acts for one organisation."""

from ninja.security import HttpBearer

from documents.services.tokens import api_token_authenticate


class ApiTokenAuth(HttpBearer):
    def authenticate(self, request, token: str):
        api_token = api_token_authenticate(raw=token)
        if api_token is None:
            return None
        request.api_token = api_token
        request.organisation = api_token.organisation
        return api_token
