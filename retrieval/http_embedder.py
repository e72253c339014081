"""An embedding provider over HTTP: any OpenAI-compatible `/v1/embeddings` endpoint
(OpenAI, Azure OpenAI, Ollama, vLLM, text-embeddings-inference).

Each request first takes a permit from the limits every worker shares
(retrieval/provider_limit.py). What the provider answers decides what the stage does:
- 429: its Retry-After holds every worker, then the request is sent again (a wait longer
  than RETRY_AFTER_MAX_SECONDS ends the attempt as transient);
- 5xx, a timeout, a connection that fails: transient (`ProviderUnavailable`, a
  ConnectionError), so the stage retries with backoff and the provider's breaker counts it;
- 401/403, 404, any other 4xx: permanent (`ProviderRefused`), the run fails at once with
  the cause in plain words: the key (by the name of its environment variable) or the model;
- an input the model says is too long (a 400, 413 or 422 that says so, or longer than
  PAPERLANE_EMBED_MAX_INPUT_TOKENS by estimate) is split in two halves at a space, each
  embedded, and its vector is the mean of theirs weighted by their length, normalised.
"""

import math
import os
import time
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from core.errors import ServiceError
from retrieval.provider_limit import estimate_tokens, provider_hold, provider_permit

# 429s answered to one request, each waited out, before the attempt ends as transient.
MAX_BUSY_ANSWERS = 5
# A 429 whose Retry-After is at most this is waited out (by every worker) and the request
# sent again; a longer one ends the attempt as a transient error (the stage retries it).
RETRY_AFTER_MAX_SECONDS = 30.0
# How much of a provider's error text is kept in a message.
MESSAGE_CHARS = 300
# The hosts of Azure OpenAI, whose keys go in the `api-key` header.
AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")
# Models that shorten their vectors to the `dimensions` asked for (OpenAI's, on OpenAI or
# Azure); any other model is sent none and must answer PAPERLANE_EMBEDDING_DIMENSIONS.
SHORTENING_MODELS = ("text-embedding-3-",)
# What providers say when an input is longer than the model takes (OpenAI, vLLM, TEI, ...).
_TOO_LONG_WORDS = (
    "context length",
    "maximum context",
    "too long",
    "must have less than",
    "input length",
    "too many tokens",
    "maximum input",
)


class ProviderUnavailable(ConnectionError):
    """The provider is down, slow or busy: worth trying again (a transient error)."""

    code = "embedding_provider_unavailable"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ProviderRefused(ServiceError):
    """The provider refused the request itself: trying again cannot help until someone
    changes the key, the model or the settings (a permanent error)."""

    status_code = 502
    code = "embedding_refused"


class _TooLong(Exception):
    """The provider said an input is longer than the model takes."""


def _error_text(response: httpx.Response) -> str:
    """The provider's own words about an error, short: OpenAI's {"error": {"message"}},
    TEI's {"error": "..."}, FastAPI's {"detail": ...}, or the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:MESSAGE_CHARS]
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message", body)))
        if isinstance(error, dict):
            error = error.get("message", error)
        return str(error)[:MESSAGE_CHARS]
    return str(body)[:MESSAGE_CHARS]


def _quota_exhausted(response: httpx.Response) -> bool:
    """Whether a 429 is OpenAI's `insufficient_quota`: a billing matter that waiting does
    not end, unlike a rate limit."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return False
    if not isinstance(error, dict):
        return False
    return "insufficient_quota" in (error.get("code"), error.get("type"))


def _retry_after(response: httpx.Response) -> float:
    """Seconds a 429 asks to wait: Retry-After in seconds or as an HTTP date (1 if absent)."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return 1.0
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max((parsedate_to_datetime(value) - timezone.now()).total_seconds(), 0.0)
    except (TypeError, ValueError):
        return 1.0


def _halves(text: str) -> tuple[str, str]:
    """The text cut in two near its middle, at a space where there is one."""
    middle = len(text) // 2
    cut = text.rfind(" ", 0, middle)
    if cut <= 0:
        cut = middle
    return text[:cut], text[cut:]


def _mean(vectors: list[list[float]], weights: list[int]) -> list[float]:
    total = sum(weights) or 1
    mean = [
        sum(v[i] * w for v, w in zip(vectors, weights, strict=True)) / total
        for i in range(len(vectors[0]))
    ]
    norm = math.sqrt(sum(x * x for x in mean))
    return [x / norm for x in mean] if norm else mean


def endpoint_url(url: str) -> str:
    """The embeddings endpoint of PAPERLANE_EMBED_URL: the URL itself when its path ends
    in `/embeddings`, else the base URL OpenAI's clients take (`…/v1`) with
    `/embeddings` added to its path (a query string, Azure's `api-version`, kept)."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    if not path.endswith("/embeddings"):
        path += "/embeddings"
    return urlunsplit(parts._replace(path=path))


class HttpEmbedder:
    """Embeds through PAPERLANE_EMBED_URL with PAPERLANE_EMBED_MODEL. Its name says the
    model and the dimensions, so search never compares vectors of two models. Its
    vectors carry meaning, as every real model's do: search ranks by them
    (PAPERLANE_SEARCH_FUSE_EMBEDDINGS=never for a provider serving a word-count model)."""

    has_meaning = True

    def __init__(self) -> None:
        self.url = endpoint_url(settings.PAPERLANE_EMBED_URL)
        # Below this cosine a chunk that holds no word of the query is no result.
        self.min_similarity = settings.PAPERLANE_EMBED_MIN_SIMILARITY
        self.model = settings.PAPERLANE_EMBED_MODEL
        self.dimensions = settings.PAPERLANE_EMBEDDING_DIMENSIONS
        self.name = f"{self.model}-{self.dimensions}"
        if not self.url or not self.model or self.dimensions < 1:
            raise ImproperlyConfigured(
                "the HTTP embedder needs PAPERLANE_EMBED_URL, PAPERLANE_EMBED_MODEL and "
                "PAPERLANE_EMBEDDING_DIMENSIONS"
            )
        if len(self.name) > 100:  # Chunk.embedding_model's length
            raise ImproperlyConfigured(f"the model's name is too long: {self.model!r}")
        self.key_env = settings.PAPERLANE_EMBED_API_KEY_ENV
        self.timeout = settings.PAPERLANE_EMBED_TIMEOUT_SECONDS
        self._client = httpx.Client(timeout=self.timeout)

    def embed(self, texts: list[str], *, max_seconds: float | None = None) -> list[list[float]]:
        """The texts' vectors, in order. `max_seconds`: a person waits (a search query), so
        the wait for a permit and the request together take about that long at most, and
        ProviderUnavailable says the provider is busy instead."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        return self._embed_all(texts, deadline)

    def _embed_all(self, texts: list[str], deadline: float | None) -> list[list[float]]:
        limit = settings.PAPERLANE_EMBED_MAX_INPUT_TOKENS
        long = {i for i, text in enumerate(texts) if limit and estimate_tokens(text) > limit}
        fitting = self._embed_fitting([t for i, t in enumerate(texts) if i not in long], deadline)
        answers = iter(fitting)
        return [
            self._embed_long(t, deadline) if i in long else next(answers)
            for i, t in enumerate(texts)
        ]

    def _embed_fitting(self, texts: list[str], deadline: float | None) -> list[list[float]]:
        """Embed `texts`; when the provider says one is too long, find it by halving the batch."""
        if not texts:
            return []
        try:
            return self._post(texts, deadline)
        except _TooLong:
            if len(texts) == 1:
                return [self._embed_long(texts[0], deadline)]
            middle = len(texts) // 2
            return self._embed_fitting(texts[:middle], deadline) + self._embed_fitting(
                texts[middle:], deadline
            )

    def _embed_long(self, text: str, deadline: float | None) -> list[float]:
        if len(text) < 2:
            raise ProviderRefused(
                f"The embedding model {self.model} refused an input of {len(text)} "
                "character as too long; check PAPERLANE_EMBED_MAX_INPUT_TOKENS and the model.",
                code="embedding_input_refused",
            )
        left, right = _halves(text)
        return _mean(self._embed_all([left, right], deadline), [len(left), len(right)])

    def _timeout(self, deadline: float | None) -> float:
        if deadline is None:
            return self.timeout
        return max(min(self.timeout, deadline - time.monotonic()), 0.1)

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.key_env, "") if self.key_env else ""
        if not key:
            return {}
        # Azure OpenAI takes its keys in `api-key`; every other provider as a bearer token.
        if (urlsplit(self.url).hostname or "").endswith(AZURE_HOSTS):
            return {"api-key": key}
        return {"Authorization": f"Bearer {key}"}

    def _post(self, texts: list[str], deadline: float | None) -> list[list[float]]:
        body: dict = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.model.startswith(SHORTENING_MODELS):
            body["dimensions"] = self.dimensions
        tokens = sum(estimate_tokens(text) for text in texts)
        for _ in range(MAX_BUSY_ANSWERS):
            with provider_permit(tokens=tokens, deadline=deadline):
                timeout = self._timeout(deadline)
                try:
                    response = self._client.post(
                        self.url, json=body, headers=self._headers(), timeout=timeout
                    )
                except httpx.TimeoutException as exc:
                    raise ProviderUnavailable(
                        f"the embedding provider did not answer within {timeout:.1f} s"
                    ) from exc
                except httpx.HTTPError as exc:
                    raise ProviderUnavailable(
                        f"could not reach the embedding provider: {exc.__class__.__name__}: {exc}"
                    ) from exc
            if response.status_code != 429:
                return self._vectors(response, texts)
            if _quota_exhausted(response):
                raise ProviderRefused(
                    "The embedding provider says the account's quota is used up (429 "
                    f"insufficient_quota: {_error_text(response)}); check its plan and billing.",
                    code="embedding_refused",
                )
            wait = _retry_after(response)
            if wait > RETRY_AFTER_MAX_SECONDS:
                provider_hold(seconds=wait)
                raise ProviderUnavailable(
                    "the embedding provider answered 429 Too Many Requests "
                    f"(retry after {wait:g} s)"
                )
            # Every worker waits it out, this one too (by itself if Redis did not hear it).
            if not provider_hold(seconds=wait):
                time.sleep(wait)
        raise ProviderUnavailable(
            f"the embedding provider answered 429 Too Many Requests {MAX_BUSY_ANSWERS} times"
        )

    def _vectors(self, response: httpx.Response, texts: list[str]) -> list[list[float]]:
        status = response.status_code
        if status >= 500:
            raise ProviderUnavailable(
                f"the embedding provider answered {status}: {_error_text(response)}"
            )
        if status >= 400:
            raise self._refusal(response)
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderUnavailable(
                f"the embedding provider's answer is not an embeddings list: {exc}"
            ) from exc
        if len(vectors) != len(texts):
            raise ProviderUnavailable(
                f"the embedding provider returned {len(vectors)} vectors for {len(texts)} inputs"
            )
        for vector in vectors:
            if len(vector) != self.dimensions:
                raise ProviderRefused(
                    f"The embedding model {self.model} returns vectors of {len(vector)} numbers, "
                    f"not {self.dimensions}; set PAPERLANE_EMBEDDING_DIMENSIONS to match it.",
                    code="embedding_dimensions_mismatch",
                )
        return vectors

    def _refusal(self, response: httpx.Response) -> Exception:
        status = response.status_code
        said = _error_text(response)
        lowered = said.lower()
        if status in (400, 413, 422) and (
            status == 413 or any(words in lowered for words in _TOO_LONG_WORDS)
        ):
            return _TooLong(said)
        if status in (401, 403):
            return ProviderRefused(
                f"The embedding provider refused the API key ({status}): check the key in "
                f"the environment variable {self.key_env}.",
                code="embedding_key_refused",
            )
        if "model" in lowered:
            return ProviderRefused(
                f"The embedding provider does not serve the model {self.model} ({status}: "
                f"{said}); check PAPERLANE_EMBED_MODEL.",
                code="embedding_model_refused",
            )
        if status == 404:
            return ProviderRefused(
                f"No embeddings endpoint answers at {self.url} (404: {said}); check "
                "PAPERLANE_EMBED_URL (the provider's base URL, such as https://api.openai.com/v1, "
                "or its full /embeddings endpoint).",
                code="embedding_refused",
            )
        return ProviderRefused(
            f"The embedding provider refused the request ({status}: {said}).",
            code="embedding_refused",
        )
