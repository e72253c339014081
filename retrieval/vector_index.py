"""The chunks' embeddings in a pgvector column, where PostgreSQL has the `vector` extension.

`Chunk.embedding` (float32 little-endian bytes) stays the record. Where the extension is
available, migration documents 0017 (or `manage.py chunk_vectors`) adds the column
`documents_chunk.embedding_vector vector`, with no fixed dimensions because models differ;
the embed stage fills it beside the bytes (`chunk_vectors_write`), and search's
k-nearest-neighbour query reads it (retrieval/vectors.py).

HNSW indexes only vectors of one size, so each (model, dimensions) gets its own partial
expression index, cosine distance:

    CREATE INDEX documents_chunk_hnsw_<hash> ON documents_chunk
    USING hnsw ((embedding_vector::vector(D)) vector_cosine_ops)
    WHERE embedding_model = 'M' AND vector_dims(embedding_vector) = D

made concurrently just after the first chunks of that model commit, or beforehand by
`manage.py chunk_vectors --current-model` (before switching the embedder). The query
repeats the expression and the predicate word for word (`knn_expression`,
`index_predicate`), or the planner cannot use the index. The model's name is a literal
in the predicate (quoted by the driver, never formatted in): a parameter would keep a
generic plan from proving that the index applies.

Without the extension every function here does nothing and search scans the bytes, up
to a bound (retrieval/vectors.py).
"""

import functools
import hashlib
import logging
import struct
import time
from collections.abc import Iterable, Sequence

from django.db import connection, transaction

from documents.models import FLOAT32_BYTES, Document
from documents.services.content import ChunkPlace, document_chunks_upsert

logger = logging.getLogger(__name__)

COLUMN = "embedding_vector"
TABLE = "documents_chunk"

# Per database (host or socket, port, name): whether the column is there, whether the
# extension walks its index iteratively, and when that was asked (time.monotonic()); asked
# again after READY_RECHECK_SECONDS, so a worker started before `migrate` added the column
# (or the extension was enabled or updated) notices it without a restart.
_ready: dict[tuple, tuple[bool, bool, float]] = {}
READY_RECHECK_SECONDS = 300.0
# The sweeper's housekeeping fills at most this many chunks' vectors per pass.
HOUSEKEEPING_BACKFILL_CHUNKS = 10_000


def _database_key() -> tuple:
    settings = connection.settings_dict
    host = settings.get("HOST") or settings.get("OPTIONS", {}).get("host")  # or a socket's
    return (host, settings.get("PORT"), settings.get("NAME"))


def _probed() -> tuple[bool, bool]:
    key = _database_key()
    cached = _ready.get(key)
    now = time.monotonic()
    if cached is None or now - cached[2] >= READY_RECHECK_SECONDS:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                "AND attname = %s AND NOT attisdropped), "
                "(SELECT extversion FROM pg_extension WHERE extname = 'vector')",
                [TABLE, COLUMN],
            )
            present, version = cursor.fetchone()
        major_minor = tuple(int(part) for part in version.split(".")[:2]) if version else (0, 0)
        cached = (present, major_minor >= (0, 8), now)
        _ready[key] = cached
    return cached[0], cached[1]


def vector_column_ready() -> bool:
    """Whether this database holds the pgvector column (PostgreSQL with the extension,
    migrated): the index path of search. Cached per process for READY_RECHECK_SECONDS."""
    return _probed()[0]


def iterative_scan_supported() -> bool:
    """Whether the extension (0.8 and later) walks its index on until enough rows pass the
    query's filter (`hnsw.iterative_scan`). Cached as `vector_column_ready` is."""
    return _probed()[1]


def vector_column_add() -> bool:
    """Enable the `vector` extension where the server offers it and add the column (as
    migration documents 0017 does, for a server that gained pgvector since). Returns
    whether the column is there. A role that may not create the extension (a managed
    database's) leaves search on its exact scan, with a warning."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            return False
        try:
            # A savepoint: a refusal (no privilege) must not end a caller's transaction.
            with transaction.atomic():
                cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception as exc:  # the driver's refusal, whatever its class
            logger.warning("The vector extension could not be created: %s", exc)
            return False
        cursor.execute(f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS {COLUMN} vector")
    _ready.pop(_database_key(), None)
    return True


def vector_index_name(*, model: str, dimensions: int) -> str:
    digest = hashlib.blake2b(f"{model}/{dimensions}".encode(), digest_size=8).hexdigest()
    return f"{TABLE}_hnsw_{digest}"


def knn_expression(*, dimensions: int, alias: str = "") -> str:
    """The indexed expression, to repeat in the query's ORDER BY (columns of `alias`)."""
    prefix = f"{alias}." if alias else ""
    return f"({prefix}{COLUMN}::vector({int(dimensions)}))"


def index_predicate(*, model: str, dimensions: int, alias: str = "") -> str:
    """The index's WHERE, to repeat in the query's (the model quoted as a literal)."""
    prefix = f"{alias}." if alias else ""
    return (
        f"{prefix}embedding_model = {_literal(model)} "
        f"AND vector_dims({prefix}{COLUMN}) = {int(dimensions)}"
    )


def _literal(value: str) -> str:
    from psycopg import sql

    connection.ensure_connection()
    return sql.Literal(value).as_string(connection.connection)


def vector_index_exists(*, model: str, dimensions: int) -> bool:
    """Whether the HNSW index of (model, dimensions) is built and valid (asked each time:
    one catalog look-up, and an index dropped by hand is noticed)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s",
            [vector_index_name(model=model, dimensions=dimensions)],
        )
        row = cursor.fetchone()
    return row is not None and bool(row[0])


def vector_index_ensure(
    *, model: str, dimensions: int, concurrently: bool = False, wait: bool = True
) -> bool:
    """Build the HNSW index of (model, dimensions) unless it is there. Returns whether it
    was built now. Outside any transaction. Without `concurrently` the build holds the
    table's SHARE lock while it scans it, so every chunk write waits; `concurrently` lets
    them go on (it needs autocommit). Two processes never build it together: a session
    advisory lock; with `wait` False one that finds it taken leaves the build to the other."""
    if not vector_column_ready() or vector_index_exists(model=model, dimensions=dimensions):
        return False
    name = vector_index_name(model=model, dimensions=dimensions)
    statement = (
        f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS {name} "
        f"ON {TABLE} USING hnsw ({knn_expression(dimensions=dimensions)} vector_cosine_ops) "
        f"WHERE {index_predicate(model=model, dimensions=dimensions)}"
    )
    if not concurrently:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])
            cursor.execute(statement)
        return True
    with connection.cursor() as cursor:
        if wait:
            cursor.execute("SELECT pg_advisory_lock(hashtext(%s))", [name])
        else:
            cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [name])
            if not cursor.fetchone()[0]:
                return False
        try:
            if vector_index_exists(model=model, dimensions=dimensions):
                return False  # built by the holder of the lock meanwhile
            # Only an index a failed CONCURRENTLY build left (invalid) is dropped.
            cursor.execute(
                "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = %s AND NOT i.indisvalid",
                [name],
            )
            if cursor.fetchone() is not None:
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            cursor.execute(statement)
            return True
        finally:
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [name])


def vector_text(data: bytes) -> str:
    """float32 little-endian bytes as pgvector's text form, every float exact."""
    return "[" + ",".join(map(repr, struct.unpack(f"<{len(data) // FLOAT32_BYTES}f", data))) + "]"


def _index_after_commit(*, model: str, vectors: Sequence[bytes]) -> None:
    """Build the model's index once the chunks' transaction commits, if it is missing: not
    inside it, where PostgreSQL refuses CREATE INDEX while the chunks' deferred foreign-key
    checks are pending, and the lock would last as long as the stage's transaction."""
    for dimensions in {len(vector) // FLOAT32_BYTES for vector in vectors}:
        if not vector_index_exists(model=model, dimensions=dimensions):
            transaction.on_commit(
                functools.partial(_index_build_committed, model=model, dimensions=dimensions),
                robust=True,
            )


def _index_build_committed(*, model: str, dimensions: int) -> None:
    """The after-commit build: concurrently, so other organisations' chunk writes go on,
    where the connection is in autocommit (a caller's outer transaction, as in a test
    case, leaves only the blocking build). A failure is logged, not raised: the chunks
    are committed, and search compares vectors exactly or by text until the index is
    built (`manage.py chunk_vectors`)."""
    try:
        vector_index_ensure(
            model=model,
            dimensions=dimensions,
            concurrently=not connection.in_atomic_block,
            wait=False,
        )
    except Exception:  # the driver's error, whatever its class
        logger.warning(
            "The vector index of %s (%d dimensions) could not be built; run "
            "manage.py chunk_vectors to build it",
            model,
            dimensions,
            exc_info=True,
        )


def chunk_vectors_write(*, chunk_ids: Sequence, vectors: Sequence[bytes], model: str) -> None:
    """Fill the vector column of the chunks `chunk_ids` (written by the embed stage, or
    given new vectors by a re-embed) from their float32 bytes `vectors`; their model's index
    is built after the commit on its first use. Nothing without the extension."""
    if not vectors or not vector_column_ready():
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET {COLUMN} = v.vec::vector "
            "FROM unnest(%s::uuid[], %s::text[]) AS v(id, vec) "
            f"WHERE {TABLE}.id = v.id",
            [list(chunk_ids), [vector_text(vector) for vector in vectors]],
        )
    _index_after_commit(model=model, vectors=vectors)


def chunks_write(
    *,
    document: Document,
    start: int,
    texts: Sequence[str],
    vectors: Sequence[bytes],
    model: str,
    places: Sequence[ChunkPlace] | None = None,
) -> list:
    """Write chunks `start`, `start + 1`, … of the document's current version with their
    vectors (documents' `document_chunks_upsert`) and fill their vector column; returns
    their ids. Inside the caller's transaction: both commit together or neither does."""
    ids = document_chunks_upsert(
        document=document, start=start, texts=texts, vectors=vectors, model=model, places=places
    )
    chunk_vectors_write(chunk_ids=ids, vectors=vectors, model=model)
    return ids


def chunk_vectors_backfill(
    *, batch_size: int = 1000, limit: int | None = None
) -> dict[tuple[str, int], int]:
    """Fill the vector column of every chunk written before it existed (the extension
    enabled later), in batches by id, each its own transaction; with `limit`, stop after
    the batch that reaches it. Returns the chunks filled per (model, dimensions); their
    indexes are `vector_indexes_build`'s job."""
    filled: dict[tuple[str, int], int] = {}
    if not vector_column_ready():
        return filled
    last = None
    while limit is None or sum(filled.values()) < limit:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, embedding, embedding_model FROM {TABLE} "
                f"WHERE {COLUMN} IS NULL AND length(embedding) >= 4"
                + (" AND id > %s" if last else "")
                + " ORDER BY id LIMIT %s",
                [last, batch_size] if last else [batch_size],
            )
            rows = cursor.fetchall()
        if not rows:
            break
        last = rows[-1][0]
        with transaction.atomic(), connection.cursor() as cursor:
            # Only a chunk still as it was read: a re-embed that committed since (new model,
            # its vector written) keeps its vector, not this read's old one. Under READ
            # COMMITTED a row the re-embed held locked is checked again once it commits.
            cursor.execute(
                f"UPDATE {TABLE} SET {COLUMN} = v.vec::vector "
                "FROM unnest(%s::uuid[], %s::text[], %s::text[]) AS v(id, vec, model) "
                f"WHERE {TABLE}.id = v.id AND {TABLE}.{COLUMN} IS NULL "
                f"AND {TABLE}.embedding_model = v.model "
                f"RETURNING {TABLE}.embedding_model, vector_dims({TABLE}.{COLUMN})",
                [
                    [row[0] for row in rows],
                    [vector_text(bytes(row[1])) for row in rows],
                    [row[2] for row in rows],
                ],
            )
            written = cursor.fetchall()
        for model, dimensions in written:
            key = (model, dimensions)
            filled[key] = filled.get(key, 0) + 1
    return filled


def chunk_vectors_housekeeping() -> int:
    """The sweeper's housekeeping: fill the vector column of up to
    HOUSEKEEPING_BACKFILL_CHUNKS chunks that have none (written before migration 0017
    added it, or by a worker that had not noticed it yet), then build, concurrently, the
    index of any model that lacks one. Returns the chunks filled."""
    filled = chunk_vectors_backfill(
        batch_size=min(1000, HOUSEKEEPING_BACKFILL_CHUNKS), limit=HOUSEKEEPING_BACKFILL_CHUNKS
    )
    for model, dimensions in filled:
        vector_index_ensure(
            model=model,
            dimensions=dimensions,
            concurrently=not connection.in_atomic_block,
            wait=False,
        )
    return sum(filled.values())


def models_in_use() -> Iterable[tuple[str, int]]:
    """Every (model, dimensions) that chunks with a vector column value hold."""
    if not vector_column_ready():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT embedding_model, vector_dims({COLUMN}) FROM {TABLE} "
            f"WHERE {COLUMN} IS NOT NULL"
        )
        return [(model, dimensions) for model, dimensions in cursor.fetchall()]


def vector_indexes_build(*, concurrently: bool = True) -> list[tuple[str, int]]:
    """Build the HNSW index of every (model, dimensions) in use that lacks one. Returns
    those built."""
    built = []
    for model, dimensions in models_in_use():
        if vector_index_ensure(model=model, dimensions=dimensions, concurrently=concurrently):
            built.append((model, dimensions))
    return built
