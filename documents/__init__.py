"""The domain: organisations, members and API tokens; documents, their stored bytes,
file formats (`formats/`), extracted text and chunks; page quotas and the usage ledger.

Writes are in `services/`, reads in `selectors.py`. Nothing here knows about
import runs or the pipeline: `jobs` builds on this app, never the reverse
(`lint-imports` keeps it so).
"""
