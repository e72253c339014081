"""The chunks nearest a query's vector, for search's semantic candidates.

Only the organisation's documents count: not deleted, their searchable version, chunks
embedded by the query's model (vectors of two models are never compared; a model's name
fixes its dimensions, and the vector's length is checked too).

Three ways, chosen per query:
- PostgreSQL with pgvector, and at most PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS chunks to
  look at: the exact answer in SQL (`<=>` over those chunks), cheaper than any index walk.
- More than that: the HNSW index of the model (retrieval/vector_index.py), walked in order
  of distance while the rows it yields are filtered by organisation and version. pgvector
  0.8+ keeps walking until `limit` rows pass (`hnsw.iterative_scan`), so an organisation
  among many larger ones still gets its k; an older pgvector returns at most
  `hnsw.ef_search` rows before filtering, so the search widens it and asks again.
- No extension: the organisation's vectors read in one row and compared in numpy, up to
  the bound; beyond it there is no answer and `complete` is False, so search says it
  ranked by text alone.

Every statement runs in a search's transaction (retrieval/statements.py), as the text
lookup's do: planned for its own parameters, and held to PAPERLANE_SEARCH_TIMEOUT_MS; one
cancelled gives no neighbours and `complete` False, and search ranks by text.
"""

import base64
import logging
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import OperationalError, connection

from documents.models import FLOAT32_BYTES
from retrieval.statements import SearchSettings, is_cancelled, search_transaction
from retrieval.vector_index import (
    index_predicate,
    iterative_scan_supported,
    knn_expression,
    vector_column_ready,
    vector_index_exists,
)

logger = logging.getLogger(__name__)

# hnsw.ef_search: candidates the index walk keeps; pgvector's own bound is 1000.
_EF_SEARCH_MIN = 100
_EF_SEARCH_MAX = 1000
# pgvector 0.8's iterative walk stops after this many index tuples (its default: 20,000).
_MAX_SCAN_TUPLES = 100_000


@dataclass(frozen=True)
class Neighbour:
    chunk_id: uuid.UUID
    document_id: uuid.UUID
    index: int
    # Cosine similarity to the query: 1 the same direction, 0 unrelated, -1 opposite.
    similarity: float


@dataclass(frozen=True)
class Neighbours:
    # Nearest first.
    rows: tuple[Neighbour, ...]
    # False when the organisation's vectors were not searched (no index and more of them
    # than the exact scan's bound): ranking must say it used text candidates only.
    complete: bool
    # How they were found: "index" (HNSW), "exact" (pgvector, every vector), "scan"
    # (numpy, every vector), "none" (not searched).
    method: str

    @property
    def chunk_ids(self) -> list[uuid.UUID]:
        return [row.chunk_id for row in self.rows]


def nearest_chunks(
    *,
    organisation_id: int,
    model: str,
    vector: list[float],
    limit: int,
    document_id: uuid.UUID | None = None,
) -> Neighbours:
    """The `limit` chunks of the organisation's searchable documents (or of one of them)
    embedded by `model` whose embeddings are nearest `vector` by cosine, nearest first."""
    if limit <= 0 or not vector:
        return Neighbours(rows=(), complete=True, method="exact")
    scope = _Scope(organisation_id, model, len(vector), document_id)
    try:
        # The search's transaction: held to PAPERLANE_SEARCH_TIMEOUT_MS, as the text
        # lookup is, and each statement planned for its own parameters.
        with search_transaction() as local:
            return _nearest(local, scope, vector, limit)
    except OperationalError as exc:
        if not is_cancelled(exc):
            raise
        # Not a failed search: it ranks by text alone and says so.
        logger.warning(
            "nearest chunks of organisation %s cancelled after %d ms",
            organisation_id,
            settings.PAPERLANE_SEARCH_TIMEOUT_MS,
        )
        return Neighbours(rows=(), complete=False, method="none")


def _nearest(local: SearchSettings, scope: "_Scope", vector: list[float], limit: int) -> Neighbours:
    model = scope.model
    bound = settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS
    if not vector_column_ready():
        return _scan(scope, vector, limit, bound)
    # The chunks settled searchable bound those of the model: few, and they are compared
    # one by one without counting them (counting up to the bound read that many rows).
    if _searchable_chunks(scope) <= bound:
        return _exact(scope, vector, limit)
    if vector_index_exists(model=model, dimensions=len(vector)):
        return _knn(local, scope, vector, limit)
    # Many chunks, but no index of this model: few of them may be on it (a re-embed).
    if _count_up_to(scope, bound + 1) <= bound:
        return _exact(scope, vector, limit)
    return Neighbours(rows=(), complete=False, method="none")


@dataclass(frozen=True)
class _Scope:
    organisation_id: int
    model: str
    dimensions: int
    document_id: uuid.UUID | None

    def where(self) -> tuple[str, list]:
        """The chunks searched, on `documents_chunk c JOIN documents_document d`."""
        clauses = [
            "d.organisation_id = %s",
            "d.deleted_at IS NULL",
            "c.version = d.searchable_version",
            "c.embedding_model = %s",
        ]
        params: list = [self.organisation_id, self.model]
        if self.document_id is not None:
            clauses.append("c.document_id = %s")
            params.append(self.document_id)
        return " AND ".join(clauses), params


_FROM = "FROM documents_chunk c JOIN documents_document d ON d.id = c.document_id"


def _uuid(value) -> uuid.UUID:
    # The exact scan's one-row read gives its ids as text.
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


def _rows(fetched) -> tuple[Neighbour, ...]:
    return tuple(
        Neighbour(
            chunk_id=_uuid(chunk_id),
            document_id=_uuid(doc),
            index=index,
            similarity=float(similarity),
        )
        for chunk_id, doc, index, similarity in fetched
    )


def _searchable_chunks(scope: _Scope) -> int:
    """The chunks of the organisation's (or the document's) searchable versions, on any
    model, as their documents record them when they settle (`chunk_count`)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(chunk_count), 0) FROM documents_document "
            "WHERE organisation_id = %s AND deleted_at IS NULL AND (%s::uuid IS NULL OR id = %s)",
            [scope.organisation_id, scope.document_id, scope.document_id],
        )
        return cursor.fetchone()[0]


def _count_up_to(scope: _Scope, cap: int) -> int:
    where, params = scope.where()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 {_FROM} WHERE {where} LIMIT %s) AS s",
            [*params, cap],
        )
        return cursor.fetchone()[0]


def _vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def _exact(scope: _Scope, vector: list[float], limit: int) -> Neighbours:
    where, params = scope.where()
    query = _vector_literal(vector)
    # Not the indexed expression: every one of these few chunks is compared.
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT c.id, c.document_id, c."index", 1 - (c.embedding_vector <=> %s::vector) '
            f"{_FROM} WHERE {where} AND vector_dims(c.embedding_vector) = %s "
            "ORDER BY c.embedding_vector <=> %s::vector, c.id LIMIT %s",
            [query, *params, scope.dimensions, query, limit],
        )
        return Neighbours(rows=_rows(cursor.fetchall()), complete=True, method="exact")


def _knn(local: SearchSettings, scope: _Scope, vector: list[float], limit: int) -> Neighbours:
    where, params = scope.where()
    distance = f"{knn_expression(dimensions=scope.dimensions, alias='c')} <=> %s::vector"
    query = _vector_literal(vector)
    sql = (
        f'SELECT c.id, c.document_id, c."index", 1 - ({distance}) {_FROM} '
        f"WHERE {index_predicate(model=scope.model, dimensions=scope.dimensions, alias='c')} "
        f"AND {where} ORDER BY {distance} LIMIT %s"
    )
    # With the sort disabled the one plan that returns rows in distance order without
    # sorting them all is the index walk: chosen whatever the table's statistics say.
    walk = {"enable_sort": "off"}
    iterative = iterative_scan_supported()
    if iterative:
        walk |= {
            "hnsw.iterative_scan": "strict_order",
            "hnsw.max_scan_tuples": str(_MAX_SCAN_TUPLES),
        }
    ef_search = min(max(_EF_SEARCH_MIN, limit), _EF_SEARCH_MAX)
    while True:
        local.set({**walk, "hnsw.ef_search": str(ef_search)})
        local.cursor.execute(sql, [query, *params, query, limit])
        rows = _rows(local.cursor.fetchall())
        if len(rows) >= limit or iterative or ef_search >= _EF_SEARCH_MAX:
            # Fewer than asked after the longest walk: the organisation's chunks are too
            # few among others' near the query for the index to reach them all; those it
            # found are still the nearest, and `complete` says the rest were not seen.
            return Neighbours(rows=rows, complete=len(rows) >= limit, method="index")
        ef_search = min(ef_search * 4, _EF_SEARCH_MAX)
        walk = {}


def cosine_similarities(data: bytes, vector: list[float]):
    """The cosine similarity with `vector` of each float32 vector of its size in `data`
    (the vectors one after another), as a numpy array, in one matrix product."""
    # Imported here, not with the module: numpy (and its BLAS threads' buffers) would
    # otherwise sit in every worker and in the extraction child forked from it, whose
    # address space is limited (PAPERLANE_EXTRACT_MEMORY_MB).
    import numpy as np

    query = np.asarray(vector, dtype=np.float32)
    matrix = np.frombuffer(data, dtype="<f4").reshape(-1, len(query))
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
    return (matrix @ query) / np.where(norms == 0, 1.0, norms)


def _scan(scope: _Scope, vector: list[float], limit: int, bound: int) -> Neighbours:
    # Counted first: an organisation beyond the bound costs a count, not its vectors.
    if _count_up_to(scope, bound + 1) > bound:
        return Neighbours(rows=(), complete=False, method="none")
    found = _read(scope, bound)
    if found is None:  # chunks written since the count
        return Neighbours(rows=(), complete=False, method="none")
    keys, data = found
    if not keys:
        return Neighbours(rows=(), complete=True, method="scan")
    import numpy as np  # see cosine_similarities

    similarity = cosine_similarities(data, vector)
    picked = range(len(keys))
    if len(keys) > limit:
        picked = np.argpartition(-similarity, limit - 1)[:limit].tolist()
    top = [(i, keys[i].split()) for i in picked]
    # Nearest first; equal similarities in chunk id order, as the SQL paths order them.
    top.sort(key=lambda item: (-similarity[item[0]], item[1][0]))
    rows = _rows((chunk, doc, int(index), similarity[i]) for i, (chunk, doc, index) in top)
    return Neighbours(rows=rows, complete=True, method="scan")


def _read(scope: _Scope, bound: int) -> tuple[list[str], bytes] | None:
    """Up to `bound` chunks' keys ("id document index") and their embeddings end to end,
    in one row: a row per chunk would cost more to read than to compare. Base64 is a
    third shorter than bytea's hex."""
    where, params = scope.where()
    with connection.cursor() as cursor:
        # One aggregate node feeds both aggregates the same rows in the same order.
        cursor.execute(
            "SELECT count(*), string_agg(s.id::text || ' ' || s.document_id::text || ' ' "
            "|| s.\"index\"::text, ','), encode(string_agg(s.embedding, ''::bytea), 'base64') "
            "FROM ("
            f'SELECT c.id, c.document_id, c."index", c.embedding {_FROM} WHERE {where} '
            "AND length(c.embedding) = %s LIMIT %s) AS s",
            [*params, scope.dimensions * FLOAT32_BYTES, bound + 1],
        )
        count, keys, data = cursor.fetchone()
    if count > bound:
        return None
    return (keys.split(",") if keys else []), base64.b64decode(data or "")
