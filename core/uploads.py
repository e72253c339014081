"""How uploads are read: bounded before a byte is kept, and the file name the client sent kept.

- `RequestSizeLimitMiddleware` answers 413 from `Content-Length` alone, before
  the body is read.
- `UploadLimitHandler`, the first upload handler, keeps at most one file per
  API request (FORM_MAX_FILES from a member page's form), only
  for a signed-in member or an API token, and stops keeping files once the
  request's files pass the size limit: nothing else is spooled to memory or
  disk. `upload_refusal` says why a file was not kept.
- Django strips folders and unprintable characters from upload names before
  application code sees them. The accept path refuses such names with a clear
  error instead of storing a silently renamed file, so it needs the original.
"""

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParser
from django.utils.datastructures import ImmutableList

from core.errors import FileTooLarge, InvalidUpload, ServiceError
from core.http import is_api_request
from core.upload_counts import REFUSED, upload_count

# What a multipart body may carry beyond its one file: boundaries, headers, the
# CSRF token and a name.
MULTIPART_OVERHEAD_BYTES = 64 * 1024
# The member page's upload: with JavaScript each file is its own request; a form sent
# without it may carry this many files (together within PAPERLANE_MAX_UPLOAD_BYTES).
FORM_MAX_FILES = 20


def _too_large() -> FileTooLarge:
    limit = settings.PAPERLANE_MAX_UPLOAD_BYTES
    return FileTooLarge(f"The file is larger than the limit of {limit} bytes.", max_bytes=limit)


class RequestSizeLimitMiddleware:
    """Refuse a request body larger than one upload (and its form) could be, unread."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > settings.PAPERLANE_MAX_UPLOAD_BYTES + MULTIPART_OVERHEAD_BYTES:
            error = _too_large()
            api = is_api_request(request)
            upload_count(channel="api" if api else "web", result=REFUSED, code=error.code)
            if api:
                return JsonResponse(error.as_dict(), status=error.status_code)
            return HttpResponse(error.message, status=error.status_code, content_type="text/plain")
        return self.get_response(request)


class UploadLimitHandler(FileUploadHandler):
    """Skip every file but the first of an API request (past the form's bound of a member
    page's), and any once the request's file bytes pass PAPERLANE_MAX_UPLOAD_BYTES."""

    def __init__(self, request=None):
        super().__init__(request)
        self.files = 0
        self.received = 0
        self.skipping = False

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        self.files += 1
        if not _may_upload(self.request):
            raise SkipFile()  # raised before later handlers open anything for it
        # A file past the bounds is skipped at its first block, not here: Django closes
        # every handler's `file` on a SkipFile, and here the next handler's is still the
        # previous file, which is kept.
        self.skipping = False
        if self.files > _files_allowed(self.request):
            self.request.upload_refused = _too_many(self.request)
            self.skipping = True
        elif self.received > settings.PAPERLANE_MAX_UPLOAD_BYTES:
            self.skipping = True  # the files before it passed the limit already

    def receive_data_chunk(self, raw_data, start):
        if self.skipping:
            raise SkipFile()
        self.received += len(raw_data)
        if self.received > settings.PAPERLANE_MAX_UPLOAD_BYTES:
            self.request.upload_refused = _too_large()
            raise SkipFile()
        return raw_data

    def file_complete(self, file_size):
        return None


def _files_allowed(request: HttpRequest) -> int:
    # A member page's form sent without JavaScript carries every file chosen; a script
    # (ours, an integration) sends one per request.
    if is_api_request(request):
        return 1
    return FORM_MAX_FILES


def _too_many(request: HttpRequest) -> InvalidUpload:
    allowed = _files_allowed(request)
    if allowed == 1:
        return InvalidUpload("Send one file per upload request.", code="one_file_per_request")
    return InvalidUpload(
        f"Send at most {allowed} files at once; the others were not sent.",
        code="too_many_files",
    )


def _may_upload(request: HttpRequest | None) -> bool:
    if request is None:
        return False
    if getattr(request, "api_token", None) is not None:
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated)


def upload_refusal(request: HttpRequest) -> ServiceError | None:
    """Why the upload handler did not keep the request's file, if it did not."""
    return getattr(request, "upload_refused", None)


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
