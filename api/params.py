"""Parameters more than one operation takes, with their bounds."""

from ninja import Path, Query

# Past the end of any real list, within PostgreSQL's bigint.
MAX_OFFSET = 10**12
MAX_PAGE = 200

DOCUMENT_ID = Path(..., description="The document's id.")
RUN_ID = Path(..., description="The run's id.")
PAGE_LIMIT = Query(50, ge=1, le=MAX_PAGE, description=f"At most this many, 1 to {MAX_PAGE}.")
PAGE_OFFSET = Query(0, ge=0, le=MAX_OFFSET, description="Skip this many first.")
