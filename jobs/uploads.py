"""How uploads are read: size refused early, and the file name the client sent kept.

Django strips folders and unprintable characters from upload names before
application code sees them. The accept path refuses such names with a clear
error instead of storing a silently renamed file, so it needs the original.
"""

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParser
from django.utils.datastructures import ImmutableList

from core.errors import FileTooLarge


class SizeLimitUploadHandler(FileUploadHandler):
    """First upload handler: stop keeping a file once it passes the size limit, so
    an oversized upload is never spooled to disk; `upload_size_error` reports it."""

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > settings.PAPERLANE_MAX_UPLOAD_BYTES:
            self.request.upload_too_large = True
            raise SkipFile()
        return raw_data

    def file_complete(self, file_size):
        return None


def upload_size_error(request: HttpRequest) -> FileTooLarge | None:
    """The error for an upload the size limit skipped, if there was one."""
    if not getattr(request, "upload_too_large", False):
        return None
    limit = settings.PAPERLANE_MAX_UPLOAD_BYTES
    return FileTooLarge(f"The file is larger than the limit of {limit} bytes.", max_bytes=limit)


class _NameKeepingParser(MultiPartParser):
    def __init__(self, *args, raw_names: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self._raw_names = raw_names

    def sanitize_file_name(self, file_name):
        safe = super().sanitize_file_name(file_name)
        if safe is not None and safe != file_name:
            self._raw_names[safe] = file_name
        return safe


class UploadNameMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        if request.method == "POST":
            request.raw_upload_names = {}

            def parse_file_upload(META, post_data):
                request.upload_handlers = ImmutableList(
                    request.upload_handlers,
                    warning="You cannot alter upload handlers after the upload has been processed.",
                )
                parser = _NameKeepingParser(
                    META,
                    post_data,
                    request.upload_handlers,
                    request.encoding,
                    raw_names=request.raw_upload_names,
                )
                return parser.parse()

            request.parse_file_upload = parse_file_upload
        return self.get_response(request)


def client_file_name(request: HttpRequest, upload) -> str:
    """The name the client sent for `upload`, before Django cleaned it."""
    return getattr(request, "raw_upload_names", {}).get(upload.name, upload.name)
