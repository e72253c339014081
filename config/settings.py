"""Paperlane settings. Every value can be set from the environment or a `.env` file.

Grouped by the part of Paperlane each tunes, in the order docs/configuration.md lists
them (every setting there, by its full name, with its default and meaning).
"""

import os
import socket
import urllib.parse
from datetime import timedelta
from pathlib import Path

import environ
from botocore.config import Config as BotocoreConfig
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


# ======================================================================================
# Django: the site, its security, its apps
# ======================================================================================

DEBUG = env.bool("DEBUG", default=False)
# Only a development run (DEBUG on) may do without a secret key of its own.
SECRET_KEY = env("SECRET_KEY", default="" if not DEBUG else "dev-only-insecure-secret-key")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "Set SECRET_KEY (a long random string) in the environment or .env; "
        "only DEBUG=true runs without one."
    )
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# HTTPS: on unless DEBUG. Behind a proxy that terminates TLS, set
# SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO (the header the proxy sets to "https").
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not DEBUG)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=not DEBUG)
_proxy_header = env("SECURE_PROXY_SSL_HEADER", default="")
SECURE_PROXY_SSL_HEADER = (_proxy_header, "https") if _proxy_header else None
# /metrics, the health check and tests on plain HTTP from inside the network.
SECURE_REDIRECT_EXEMPT = env.list("SECURE_REDIRECT_EXEMPT", default=[])
# Proxies in front of the web (a load balancer, nginx) that each append the address they
# were reached from to X-Forwarded-For; 0: the connection's address is the client's. The
# sign-in limits count failures per address.
PAPERLANE_TRUSTED_PROXY_COUNT = env.int("PAPERLANE_TRUSTED_PROXY_COUNT", default=0)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_rq",
    # Serves Swagger UI's files for /api/v1/docs from here, not from a CDN.
    "ninja",
    "axes",
    "documents",
    "pipeline",
    "webhooks",
    "connectors",
    "operations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "core.uploads.RequestSizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "core.uploads.UploadNameMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Refuses a NUL (and what else PostgreSQL or our rules cannot take) in any input.
    "core.client_text.ClientTextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A 405 under /api/ is JSON like every other error there.
    "config.errors.JsonMethodNotAllowedMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into its page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                # The member pages' header: organisation, switcher, role (web/context.py).
                "web.context.member",
            ],
            "libraries": {"paperlane": "web.templatetags.paperlane"},
        },
    },
]

# Every password set (changed on /accounts/password/ or in the admin, `add_member
# --password`, `createsuperuser`) is checked by these: at least 8 characters, not like
# the username, not one of the 20,000 most common, not digits alone.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in (
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    )
]

# Sign-in limits (django-axes, core/signin.py), on /accounts/login/ and /admin/login/: a
# username that fails this many times in a row from one address is refused there, the
# right password too, for the cool-off (operators lift it sooner: admin or `axes_reset`).
PAPERLANE_SIGNIN_FAILURE_LIMIT = env.int("PAPERLANE_SIGNIN_FAILURE_LIMIT", default=5)
PAPERLANE_SIGNIN_COOLOFF_SECONDS = env.int("PAPERLANE_SIGNIN_COOLOFF_SECONDS", default=900)
AUTHENTICATION_BACKENDS = [
    "core.signin.SignInLimitBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = PAPERLANE_SIGNIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(seconds=PAPERLANE_SIGNIN_COOLOFF_SECONDS)
# The username and address together: nobody locks a person out from another address.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "core.signin.client_address"
AXES_LOCKOUT_CALLABLE = "core.signin.lockout_response"
# Failed attempts are kept (the admin lists them); successful sign-ins are not logged.
AXES_DISABLE_ACCESS_LOG = True

# Content-Security-Policy on every response (django-csp): scripts, styles, fonts, images
# and requests from this site only (no inline script or style, no other host), never
# framed. The OneDrive section below lets the connect form lead to Microsoft's sign-in.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        # Swagger UI's and the admin's icons are data: URLs in their style sheets.
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

LANGUAGE_CODE = "en-gb"
# Times in the admin and on pages are shown in this zone; stored in UTC.
TIME_ZONE = env("TIME_ZONE", default="UTC")
USE_I18N = True
# Times with seconds in the admin and on pages (config/formats/en_GB).
FORMAT_MODULE_PATH = ["config.formats"]
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Set STATIC_ROOT to run collectstatic; without it WhiteNoise serves from the app folders.
STATIC_ROOT = env("STATIC_ROOT", default=None)
# WhiteNoise serves static files from the finders too, so no collectstatic is
# needed to run; production deployments may still collect them.
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "web:document_list"
LOGOUT_REDIRECT_URL = "login"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # httpx logs every request at INFO: one line per embedding call is noise.
        "httpx": {"level": "WARNING"},
    },
}


# ======================================================================================
# Database
# ======================================================================================

# PostgreSQL only. Without DATABASE_URL: the demo's embedded server, on its socket in
# var/postgres (scripts/embedded_postgres.py, which `make demo` starts and stops).
_DEMO_SOCKET_DIR = urllib.parse.quote(str(BASE_DIR / "var" / "postgres"))
_DEMO_DATABASE_URL = f"postgres://postgres@/paperlane?host={_DEMO_SOCKET_DIR}"
DATABASES = {"default": env.db("DATABASE_URL", default=_DEMO_DATABASE_URL)}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must name a PostgreSQL database (postgres://...).")
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Parameters bound by the server, and each statement prepared by a connection once it has
# run it five times (prepare_threshold): a worker plans its claim and completion once, not
# once per stage, and sends no quoted values (bench/pipeline.py: PostgreSQL's CPU per
# document halved). A search's statements are planned for their words each time all the
# same (retrieval/statements.py). Behind PgBouncer in transaction mode that keeps no
# prepared statements (before 1.21, or with max_prepared_statements at 0), add
# `?server_side_binding=false` to DATABASE_URL (docs/production.md).
_options = DATABASES["default"].setdefault("OPTIONS", {})
_options["server_side_binding"] = str(_options.get("server_side_binding", True)).lower() == "true"
if _options["server_side_binding"]:
    _options["prepare_threshold"] = int(_options.get("prepare_threshold", 5))

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


# ======================================================================================
# Storage: local files, or S3 when a bucket is named
# ======================================================================================

MEDIA_ROOT = env.path("MEDIA_ROOT", default=BASE_DIR / "media")
MEDIA_URL = "media/"

AWS_STORAGE_BUCKET_NAME = env("AWS_STORAGE_BUCKET_NAME", default="")
if AWS_STORAGE_BUCKET_NAME:
    AWS_S3_ENDPOINT_URL = env("AWS_S3_ENDPOINT_URL", default=None)
    AWS_S3_REGION_NAME = env("AWS_S3_REGION_NAME", default=env("AWS_DEFAULT_REGION", default=None))
    AWS_DEFAULT_ACL = None
    AWS_S3_FILE_OVERWRITE = True
    DEFAULT_FILE_STORAGE_BACKEND = "storages.backends.s3.S3Storage"
else:
    DEFAULT_FILE_STORAGE_BACKEND = "django.core.files.storage.FileSystemStorage"
# Every call to S3 has a budget, uploads waiting on it: 2 s to connect, 5 s for each read
# or write on the socket, and 2 tries in all (botocore's standard retry mode).
AWS_S3_CLIENT_CONFIG = BotocoreConfig(
    connect_timeout=2,
    read_timeout=5,
    retries={"max_attempts": 2, "mode": "standard"},
    s3={"addressing_style": env("AWS_S3_ADDRESSING_STYLE", default=None)},
)
STORAGES = {
    "default": {"BACKEND": DEFAULT_FILE_STORAGE_BACKEND},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


# ======================================================================================
# Redis (RQ's queues, the breakers, the counters)
# ======================================================================================

REDIS_URL = env("REDIS_URL", default="redis://127.0.0.1:6379/0")
# django-rq's RQ_QUEUES is derived from the stage list (pipeline/stage_list.py) at start-up.


# ======================================================================================
# Uploads: what the accept path takes, direct uploads, downloads
# ======================================================================================

PAPERLANE_MAX_UPLOAD_BYTES = env.int("PAPERLANE_MAX_UPLOAD_BYTES", default=50 * 1024 * 1024)
PAPERLANE_MAX_PAGES_PER_DOCUMENT = env.int("PAPERLANE_MAX_PAGES_PER_DOCUMENT", default=5000)
# Uploads' other bounds are constants beside their use: the inspection at accept
# (documents/reading.py), the file name (pipeline/services/accept.py), the files of a form
# (core/uploads.py), direct uploads (pipeline/services/direct_uploads.py and
# documents/services/pending_uploads.py), the page's own to S3 (web/document_views.py).
FILE_UPLOAD_HANDLERS = [
    "core.uploads.UploadLimitHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# Files above this size are spooled to disk while the request is parsed.
FILE_UPLOAD_MAX_MEMORY_SIZE = env.int("FILE_UPLOAD_MAX_MEMORY_SIZE", default=5 * 1024 * 1024)
# Direct uploads (POST /api/v1/uploads, S3 only): how long the presigned URL takes the PUT.
PAPERLANE_UPLOAD_URL_SECONDS = env.int("PAPERLANE_UPLOAD_URL_SECONDS", default=900)
# GET /documents/{id}/file on S3: a redirect to a URL that serves the file for this long,
# so that no web thread is held while a client reads. 0 streams it through the web
# instead (an S3 endpoint that clients cannot reach, such as a private MinIO).
PAPERLANE_DOWNLOAD_URL_SECONDS = env.int("PAPERLANE_DOWNLOAD_URL_SECONDS", default=60)
if AWS_STORAGE_BUCKET_NAME:
    # The member page PUTs large files to the bucket's presigned URLs from the browser.
    _s3 = urllib.parse.urlsplit(AWS_S3_ENDPOINT_URL) if AWS_S3_ENDPOINT_URL else None
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["connect-src"].append(
        f"{_s3.scheme}://{_s3.netloc}" if _s3 else "https://*.amazonaws.com"
    )


# ======================================================================================
# Admission: uploads refused with 429 and Retry-After when full (0 turns a check off)
# ======================================================================================

# Interactive runs (uploads from people and the API) not yet ended, at most; and at
# most this many of them for one organisation, so one backfill cannot fill the system.
PAPERLANE_ADMISSION_BACKLOG_BOUND = env.int("PAPERLANE_ADMISSION_BACKLOG_BOUND", default=1000)
PAPERLANE_ADMISSION_ORGANISATION_BOUND = env.int(
    "PAPERLANE_ADMISSION_ORGANISATION_BOUND", default=500
)
# The promise: no interactive stage waits longer than this for a worker.
PAPERLANE_ADMISSION_PROMISE_SECONDS = env.int("PAPERLANE_ADMISSION_PROMISE_SECONDS", default=300)
# Retry-After's default and most: pipeline/services/admission.py.


# ======================================================================================
# Pipeline: stages, workers, lanes, retries, leases
# ======================================================================================

# Per-stage overrides, e.g. PAPERLANE_STAGE_TIMEOUTS=extract=600,embed=900
PAPERLANE_STAGE_TIMEOUTS = {
    k: int(v) for k, v in env.dict("PAPERLANE_STAGE_TIMEOUTS", default={}).items()
}
# Workers per stage that take interactive work first (uploads from people and the
# API), e.g. extract=3, and workers that take bulk work first (connector imports,
# re-processing), e.g. PAPERLANE_STAGE_BULK_CONCURRENCY=extract=1. Either kind takes
# the other's work when its own is empty. See "Priorities and lanes" in the README.
PAPERLANE_STAGE_CONCURRENCY = {
    k: int(v) for k, v in env.dict("PAPERLANE_STAGE_CONCURRENCY", default={}).items()
}
PAPERLANE_STAGE_BULK_CONCURRENCY = {
    k: int(v) for k, v in env.dict("PAPERLANE_STAGE_BULK_CONCURRENCY", default={}).items()
}
# Queues ("lanes") per stage and priority: organisations take turns between lanes.
PAPERLANE_LANES = env.int("PAPERLANE_LANES", default=8)
# Transient errors: retried with exponential backoff and full jitter, then dead letter.
PAPERLANE_RETRY_MAX_ATTEMPTS = env.int("PAPERLANE_RETRY_MAX_ATTEMPTS", default=5)
PAPERLANE_RETRY_BASE_SECONDS = env.float("PAPERLANE_RETRY_BASE_SECONDS", default=2.0)
PAPERLANE_RETRY_CAP_SECONDS = env.float("PAPERLANE_RETRY_CAP_SECONDS", default=300.0)
# ...and a stage is dead-lettered only once it has also been failing this long: a short
# provider outage must not use up a document's quick tries.
PAPERLANE_RETRY_MIN_WINDOW_SECONDS = env.float("PAPERLANE_RETRY_MIN_WINDOW_SECONDS", default=60.0)
# A stage whose worker dies this many times in a row is poison: dead letter.
PAPERLANE_POISON_CRASHES = env.int("PAPERLANE_POISON_CRASHES", default=3)
# A worker holds a stage for this long and renews the hold every third of it;
# a dead worker's stage is picked up again after at most lease + sweep interval.
PAPERLANE_LEASE_SECONDS = env.int("PAPERLANE_LEASE_SECONDS", default=30)
PAPERLANE_SWEEP_INTERVAL_SECONDS = env.float("PAPERLANE_SWEEP_INTERVAL_SECONDS", default=5.0)
# A due stage whose job has not started after this long is delivered again.
PAPERLANE_REDELIVER_AFTER_SECONDS = env.int("PAPERLANE_REDELIVER_AFTER_SECONDS", default=60)
# The name this host's workers go by in RQ, attempts and the admin (`run_workers --host`
# overrides it for its children): two supervisors on one machine need two names.
PAPERLANE_HOST_NAME = env("PAPERLANE_HOST_NAME", default=socket.gethostname())
# Seconds a stopping worker may take to finish its current stage before it is
# told to give the stage back.
PAPERLANE_SHUTDOWN_GRACE_SECONDS = env.int("PAPERLANE_SHUTDOWN_GRACE_SECONDS", default=30)

# pipeline.rq_workers.LaneWorker (an rq.worker.SimpleWorker) runs stages in the worker process
# (no fork per job); pipeline.rq_workers.ForkingLaneWorker (an rq.Worker) forks a work horse per
# job. See bench/pipeline.py for the cost. A plain RQ class named here gets the lane
# order (pipeline.rq_workers.LaneOrder) and a prompt stop (pipeline/rq_workers.py) mixed in.
PAPERLANE_WORKER_CLASS = env("PAPERLANE_WORKER_CLASS", default="pipeline.rq_workers.LaneWorker")
# The workers' and the sweeper's other bounds are constants beside their use: bulk turns
# (pipeline/rq_workers.py), the hung margin (pipeline/lease.py), stranded jobs
# (pipeline/dispatch.py), the housekeeping of stored orphans (pipeline/sweeper.py) and of
# old syncs (connectors/services.py), the extraction child's documents
# (pipeline/stages/extract.py).


# ======================================================================================
# Extraction limits
# ======================================================================================

# Text is extracted in a child process with this much memory (address space) and CPU.
PAPERLANE_EXTRACT_MEMORY_MB = env.int("PAPERLANE_EXTRACT_MEMORY_MB", default=1536)
PAPERLANE_EXTRACT_CPU_SECONDS = env.int("PAPERLANE_EXTRACT_CPU_SECONDS", default=240)
# The languages OCR reads scans in (Tesseract's names joined by "+", "eng+deu"); an
# organisation may choose its own in the admin.
PAPERLANE_OCR_LANGUAGES = env.str("PAPERLANE_OCR_LANGUAGES", default="eng")
# A document with more text than this fails (and one with more on a page, or more chunks:
# documents/reading.py, pipeline/stages/embed.py).
PAPERLANE_MAX_CHARS_PER_DOCUMENT = env.int("PAPERLANE_MAX_CHARS_PER_DOCUMENT", default=20_000_000)


# ======================================================================================
# Chunks, embeddings and search
# ======================================================================================

PAPERLANE_CHUNK_CHARS = env.int("PAPERLANE_CHUNK_CHARS", default=1200)
# The embedding provider's class: the local hashing one (offline, the default) or
# retrieval.http_embedder.HttpEmbedder for an OpenAI-compatible /v1/embeddings endpoint.
PAPERLANE_EMBEDDER = env("PAPERLANE_EMBEDDER", default="retrieval.embedding.HashingEmbedder")
# The length of every vector (the hashing embedder's, or the model's; part of its name).
PAPERLANE_EMBEDDING_DIMENSIONS = env.int("PAPERLANE_EMBEDDING_DIMENSIONS", default=384)
# Chunks the embed stage hands the provider at once (one request for the HTTP provider).
PAPERLANE_EMBED_BATCH_SIZE = env.int("PAPERLANE_EMBED_BATCH_SIZE", default=64)
# The HTTP provider (retrieval/http_embedder.py): its base URL as OpenAI's clients take
# it (`https://api.openai.com/v1`, `http://localhost:11434/v1`) or the full endpoint
# (`…/v1/embeddings`), and the model.
PAPERLANE_EMBED_URL = env("PAPERLANE_EMBED_URL", default="https://api.openai.com/v1")
PAPERLANE_EMBED_MODEL = env("PAPERLANE_EMBED_MODEL", default="text-embedding-3-small")
# The NAME of the environment variable that holds the API key (the key itself is never a
# setting, so it is in no settings dump); empty variable: no key is sent (Ollama, vLLM).
PAPERLANE_EMBED_API_KEY_ENV = env("PAPERLANE_EMBED_API_KEY_ENV", default="OPENAI_API_KEY")
# The longest one request may take before it counts as a transient failure.
PAPERLANE_EMBED_TIMEOUT_SECONDS = env.float("PAPERLANE_EMBED_TIMEOUT_SECONDS", default=30.0)
# Requests in flight at once across every worker and host (0: no limit).
PAPERLANE_EMBED_CONCURRENCY = env.int("PAPERLANE_EMBED_CONCURRENCY", default=0)
# Requests and estimated tokens (characters / 4) in any minute across every worker and
# host, counted in Redis per request sent to the provider (0: no limit).
PAPERLANE_EMBED_REQUESTS_PER_MINUTE = env.int("PAPERLANE_EMBED_REQUESTS_PER_MINUTE", default=0)
PAPERLANE_EMBED_TOKENS_PER_MINUTE = env.int("PAPERLANE_EMBED_TOKENS_PER_MINUTE", default=0)
# An input estimated longer than this is split before it is sent (0: only when the
# provider answers that it is too long).
PAPERLANE_EMBED_MAX_INPUT_TOKENS = env.int("PAPERLANE_EMBED_MAX_INPUT_TOKENS", default=0)
# The model's similarity floor: a chunk found only by its meaning (it holds no word of
# the query) is a result only if its cosine similarity to the query is at least this,
# and at least half the nearest chunk's (retrieval/search.py). Every model
# spreads its cosines differently: calibrate it on your own documents with
# `bench/meaning.py --provider-url` (docs/api.md, "The floor").
PAPERLANE_EMBED_MIN_SIMILARITY = env.float("PAPERLANE_EMBED_MIN_SIMILARITY", default=0.4)
# GET /search: the stemmer (a PostgreSQL text search configuration: `english`, `simple`
# for none, ...). The index is built in it: after changing it, run `manage.py
# search_index` (it rebuilds the index).
PAPERLANE_SEARCH_LANGUAGE = env("PAPERLANE_SEARCH_LANGUAGE", default="english")
# Whether the query embedding's cosine ranks too: `auto` when the embedder's vectors have
# a meaning (not the default hashing one, whose ranking made search worse), `always`, `never`.
PAPERLANE_SEARCH_FUSE_EMBEDDINGS = env("PAPERLANE_SEARCH_FUSE_EMBEDDINGS", default="auto")
# The longest a search waits for its query's embedding; past it, or while the provider's
# breaker is open, it ranks by text alone and says `embedding_unavailable`.
PAPERLANE_SEARCH_EMBED_BUDGET_MS = env.int("PAPERLANE_SEARCH_EMBED_BUDGET_MS", default=400)
# Each search statement's bound in PostgreSQL: the text lookup is refused past it, the
# nearest-neighbour lookup gives none (ranked by text).
PAPERLANE_SEARCH_TIMEOUT_MS = env.int("PAPERLANE_SEARCH_TIMEOUT_MS", default=3000)
# Semantic candidates: up to this many of an organisation's chunks are compared with the
# query one by one; beyond it only pgvector's HNSW index answers, and without pgvector the
# search ranks by text alone and says so (retrieval/vectors.py).
PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = env.int(
    "PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS", default=5000
)
# Chunks' overlap (retrieval/chunking.py), waiting out a provider's 429
# (retrieval/http_embedder.py), the search's candidates (retrieval/search.py) and matches
# read (retrieval/text.py), and the pause of a failing provider (core/provider_breaker.py)
# are constants beside their use.


# ======================================================================================
# Operators: the admin, the dashboard, /metrics
# ======================================================================================

# A queued or processing run with no progress for this long is "stuck" (admin, dashboard).
PAPERLANE_STUCK_AFTER_SECONDS = env.int("PAPERLANE_STUCK_AFTER_SECONDS", default=900)
# The dashboard asks for attention above these: the age of a stage's oldest waiting
# job, and the share of a stage's attempts that failed in the last 15 minutes.
PAPERLANE_ATTENTION_LAG_SECONDS = env.int("PAPERLANE_ATTENTION_LAG_SECONDS", default=120)
PAPERLANE_ATTENTION_FAILURE_RATE = env.float("PAPERLANE_ATTENTION_FAILURE_RATE", default=0.2)
# /metrics answers staff, or a request with "Authorization: Bearer <this>" (empty: staff only).
PAPERLANE_METRICS_TOKEN = env("PAPERLANE_METRICS_TOKEN", default="")


# ======================================================================================
# API tokens
# ======================================================================================

# Active (unrevoked) API tokens an organisation may hold at once; 0 turns the check off.
PAPERLANE_MAX_ACTIVE_TOKENS = env.int("PAPERLANE_MAX_ACTIVE_TOKENS", default=50)
# Requests one API token may make in any minute; more get 429 with Retry-After (0: no
# limit). Counted in Redis; while Redis does not answer, requests are not limited.
PAPERLANE_API_RATE_PER_MINUTE = env.int("PAPERLANE_API_RATE_PER_MINUTE", default=600)
# The API's base URLs as its OpenAPI document lists them (`servers`), e.g.
# https://paperlane.example.com; none: "/", the server that served the document.
PAPERLANE_API_SERVERS = env.list("PAPERLANE_API_SERVERS", default=[])


# ======================================================================================
# Webhooks (webhooks/)
# ======================================================================================

# Networks (CIDRs, comma separated) webhooks may be sent to although they are private,
# loopback or link-local: receivers inside the operator's own network, which may also
# take plain HTTP. Empty, the default: public HTTPS addresses only.
PAPERLANE_WEBHOOK_ALLOWED_NETWORKS = env.list("PAPERLANE_WEBHOOK_ALLOWED_NETWORKS", default=[])
# A try's whole time (connecting, at most 5 s of it, sending, the answer). A worker's hold
# on an endpoint lasts three times this, renewed with each try, and its turn at one
# endpoint twice this (webhooks/delivery.py).
PAPERLANE_WEBHOOK_TIMEOUT_SECONDS = env.float("PAPERLANE_WEBHOOK_TIMEOUT_SECONDS", default=10.0)
# The waits after each failed try (each drawn between half of it and all of it): the
# first retry within 20 s, the last about a day after the first try; then the delivery
# is dead-lettered (8 tries). The webhook workers are counted with the stages' workers:
# PAPERLANE_STAGE_CONCURRENCY=webhooks=2 (one by default).
PAPERLANE_WEBHOOK_RETRY_SECONDS = [
    float(v)
    for v in env.list(
        "PAPERLANE_WEBHOOK_RETRY_SECONDS",
        default=["20", "120", "600", "3600", "10800", "21600", "43200"],
    )
]

# ======================================================================================
# Connected folders
# ======================================================================================

# The Fernet keys (urlsafe base64 of 32 bytes each) of connections' credentials and
# webhook endpoints' signing secrets at rest, newest first, comma separated: the first
# encrypts, any decrypts. `from-secret-key` names the key derived from SECRET_KEY, the only
# one when none is set. After putting a new key first, `manage.py
# reencrypt_connector_credentials` rewrites what is stored; then the old key can go
# (core/secrets.py).
PAPERLANE_CONNECTOR_KEYS = env.list("PAPERLANE_CONNECTOR_KEYS", default=[])
# The single key of earlier versions is no longer read: a deployment that still sets it
# alone would no longer read the credentials stored under it.
if os.environ.get("PAPERLANE_CONNECTOR_KEY") and not PAPERLANE_CONNECTOR_KEYS:
    raise ImproperlyConfigured(
        "PAPERLANE_CONNECTOR_KEY is no longer read: set PAPERLANE_CONNECTOR_KEYS to the same "
        "key (a list, newest first), then unset PAPERLANE_CONNECTOR_KEY."
    )
# How often each provider's connections are synced without being asked (seconds):
# local folders are polled; OneDrive is synced on change notifications, this is the fallback.
PAPERLANE_CONNECTOR_SYNC_SECONDS = {
    "local": 5,
    "onedrive": 900,
    **{k: float(v) for k, v in env.dict("PAPERLANE_CONNECTOR_SYNC_SECONDS", default={}).items()},
}
# A file deleted at its source: its document is marked so; remove its chunks from search too?
PAPERLANE_CONNECTOR_DELETE_REMOVES_CHUNKS = env.bool(
    "PAPERLANE_CONNECTOR_DELETE_REMOVES_CHUNKS", default=True
)
# The folders of this server that local connections may read (absolute paths, comma
# separated): a connection's folder must resolve inside one. Empty, the default: no local
# folder is read. MEDIA_ROOT, this project's folder (but a root named beneath it), the
# Python environment and the static files are refused whatever the roots say
# (connectors/local_roots.py).
PAPERLANE_LOCAL_FOLDER_ROOTS = env.list("PAPERLANE_LOCAL_FOLDER_ROOTS", default=[])
if any(not os.path.isabs(root) for root in PAPERLANE_LOCAL_FOLDER_ROOTS):
    raise ImproperlyConfigured("PAPERLANE_LOCAL_FOLDER_ROOTS must name absolute paths.")
# The connectors' other bounds are constants beside their use: the loop's pace
# (connectors/loop.py), a connection's failures and sync lease (connectors/sync.py), a
# download's time (connectors/source.py; its size is PAPERLANE_MAX_UPLOAD_BYTES), a local
# file's quiet time (connectors/local.py), the providers (connectors/registry.py).


# ======================================================================================
# OneDrive (Microsoft Graph)
# ======================================================================================

# The app registration (README, "Connecting OneDrive"). Empty client id: OneDrive is off.
PAPERLANE_ONEDRIVE_CLIENT_ID = env("PAPERLANE_ONEDRIVE_CLIENT_ID", default="")
PAPERLANE_ONEDRIVE_CLIENT_SECRET = env("PAPERLANE_ONEDRIVE_CLIENT_SECRET", default="")
# "common" (work, school and personal accounts), "organizations", or a tenant id.
PAPERLANE_ONEDRIVE_TENANT = env("PAPERLANE_ONEDRIVE_TENANT", default="common")
# The callback registered with the app; empty: built from the request
# (https://<host>/connections/onedrive/callback/).
PAPERLANE_ONEDRIVE_REDIRECT_URI = env("PAPERLANE_ONEDRIVE_REDIRECT_URI", default="")
# The Graph permissions asked for: the signed-in person's own files (Files.Read). Folders
# shared with them from other drives or SharePoint libraries need Files.Read.All
# (docs/connectors.md, "Connecting OneDrive").
PAPERLANE_ONEDRIVE_SCOPES = env("PAPERLANE_ONEDRIVE_SCOPES", default="offline_access Files.Read")
# National clouds (and the tests' local server) change these two.
PAPERLANE_ONEDRIVE_GRAPH_URL = env(
    "PAPERLANE_ONEDRIVE_GRAPH_URL", default="https://graph.microsoft.com/v1.0"
)
PAPERLANE_ONEDRIVE_LOGIN_URL = env(
    "PAPERLANE_ONEDRIVE_LOGIN_URL", default="https://login.microsoftonline.com"
)
if PAPERLANE_ONEDRIVE_CLIENT_ID:
    # The connect form's answer is a redirect to Microsoft's sign-in, which the browser
    # follows only if the policy's form-action names it.
    _login = urllib.parse.urlsplit(PAPERLANE_ONEDRIVE_LOGIN_URL)
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(
        f"{_login.scheme}://{_login.netloc}"
    )
# Where the store stage may fetch a file's pre-authenticated download URL (and every
# redirect it leads to) from: HTTPS to hosts ending in a ".suffix" or named exactly, or
# an exact origin "http://127.0.0.1:8123" (a local stand-in). Comma separated; national
# clouds add theirs (connectors/onedrive_download.py).
PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS = env.list(
    "PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS",
    default=[
        "graph.microsoft.com",
        ".sharepoint.com",
        ".sharepoint.us",
        ".sharepoint-mil.us",
        ".sharepoint.cn",
        ".1drv.com",
        ".onedrive.com",
        ".live.net",
        ".storage.live.com",
        ".livefilestore.com",
        ".microsoftpersonalcontent.com",
    ],
)
# Public HTTPS address of the notification endpoint (https://<host>/connections/onedrive/
# notifications/); empty: no change notifications, the periodic sync only.
PAPERLANE_ONEDRIVE_NOTIFICATION_URL = env("PAPERLANE_ONEDRIVE_NOTIFICATION_URL", default="")
# Graph's timeouts and waits (connectors/onedrive_graph.py), its folder walks
# (connectors/onedrive_folders.py) and subscriptions (connectors/onedrive.py) are
# constants beside their use.
