"""What schemathesis sends as an upload's `file`: the run loads this module
(SCHEMATHESIS_HOOKS) and draws each media type the operation declares in its
`encoding` from real files of that type, as people upload them. A file of the declared
type is what the contract promises to accept; bytes of any other kind are refused, and
the negative phase sends those."""

import uuid

import schemathesis
from hypothesis import strategies as st

from formats.base import MEDIA_TYPES
from tests.support.files import make_docx, make_pdf
from tests.support.scans import NAMES, as_jpeg, as_png, as_tiff, make_scan

# Each drawn file differs in its words or pages, so that not every upload is a duplicate.
_LABELS = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=12)
_SCANS = st.sampled_from(NAMES).map(make_scan)

STRATEGIES = {
    "pdf": st.builds(make_pdf, st.integers(1, 3), label=_LABELS),
    "docx": st.builds(make_docx, st.integers(1, 4), words_per_paragraph=st.integers(5, 60)),
    "png": _SCANS.map(as_png),
    "jpeg": _SCANS.map(as_jpeg),
    "tiff": _SCANS.map(lambda scan: as_tiff([scan])),
}

for kind, media_type in MEDIA_TYPES.items():
    schemathesis.openapi.media_type(media_type, STRATEGIES[kind])


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    """An Idempotency-Key names one request: a client sends a new key with each new file
    (docs/api.md). The run draws keys from a few short strings, so two different files
    would share one and the second be refused `400 idempotency_key_reused`, which is
    the key's history speaking, not the request's schema. Each valid key drawn is made
    that request's own; invalid keys (the negative phase) are sent as drawn."""
    key = (case.headers or {}).get("Idempotency-Key")
    if key is None or not case.meta or not case.meta.generation.mode.is_positive:
        return
    case.headers["Idempotency-Key"] = f"{key[:200]}-{uuid.uuid4().hex}"
