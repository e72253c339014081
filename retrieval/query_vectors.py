"""Query embeddings kept in Redis for a short while (KEEP_SECONDS),
so that the same query again (a person paging through results, a client polling) costs no
call to the embedding provider. Keyed by the model's name and the SHA-256 of the text the
provider is sent; the vector is kept as the float32 bytes chunks store. A person waits:
the request's Redis client (short timeout, its own breaker), and Redis away only means
the provider is asked."""

import hashlib

from redis.exceptions import RedisError

from core.redis import caller_connection
from retrieval.embedding import pack_vector, unpack_vector

KEY = "paperlane:query-vector:{model}:{digest}"
# Long enough for a person paging through results or refining a search; short enough
# that a model's vectors are not kept for long after it changes (its name is in the key).
KEEP_SECONDS = 600


def _key(model: str, text: str) -> str:
    return KEY.format(model=model, digest=hashlib.sha256(text.encode()).hexdigest())


def query_vector_kept(model: str, text: str) -> list[float] | None:
    """The vector kept for `text` under `model`, if it is still kept."""
    client, breaker = caller_connection(in_request=True)
    if client is None:
        return None
    try:
        data = client.get(_key(model, text))
    except RedisError:
        breaker.trip("reading a query's embedding")
        return None
    return unpack_vector(data) if data else None


def query_vector_keep(model: str, text: str, vector: list[float]) -> None:
    client, breaker = caller_connection(in_request=True)
    if client is None:
        return
    try:
        client.set(_key(model, text), pack_vector(vector), ex=KEEP_SECONDS)
    except RedisError:
        breaker.trip("keeping a query's embedding")
