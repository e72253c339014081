"""The domain: organisations, members and API tokens; documents, their stored bytes,
the settings' limits for reading them (`reading`), extracted text and chunks; page
quotas and the usage ledger.

Writes are in `services/`, reads in `selectors.py`. Nothing here knows about runs,
connected folders or search: those apps build on this one, never the reverse; it
imports only `formats` (the file parsers) and `core`.
"""
