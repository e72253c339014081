"""The API's parser: every JSON body and form field an operation reads is checked for the
characters core/client_text.py refuses, once it is parsed (the path, the query string and
the headers were checked by its middleware before the request got here)."""

from ninja.parser import Parser

from core.client_text import json_check, querydict_check


class ClientTextParser(Parser):
    def parse_body(self, request):
        data = super().parse_body(request)
        json_check(data)
        return data

    def parse_querydict(self, data, list_fields, request):
        # Form and File parameters: the multipart body is read now, after authentication.
        if request.method == "POST":
            querydict_check("form field", request.POST)
        return super().parse_querydict(data, list_fields, request)
