"""store: make sure the bytes are at the document's stable key and are the ones accepted.

A connector's run fetches them from its provider here, counts their pages and
holds them (`connectors/source.py`). Uploads skip this stage (their bytes are
stored at accept and checked by `extract`); an upload's run that was due here before
they did still passes through it.
"""

import hashlib

from connectors.source import connector_store
from pipeline.models import RunSource
from pipeline.stages.context import StageContext
from pipeline.stages.stored_file import open_stored, verify_stored


def run(ctx: StageContext) -> None:
    if ctx.run.source == RunSource.CONNECTOR:
        connector_store(ctx)
        return
    document = ctx.document
    digest, size = hashlib.sha256(), 0
    with open_stored(document) as fh:
        while block := fh.read(1024 * 1024):
            digest.update(block)
            size += len(block)
    verify_stored(document, size=size, sha256=digest.hexdigest())
