"""Shared by the benchmarks: a scratch PostgreSQL database, Redis db and media dir.

Importing it sets Django up against the bench database, so every bench module
can import the project (and the tests' helpers) at the top.
"""

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import django
import django.db
import psycopg
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
BENCH_DB = os.environ.get("BENCH_DB", "paperlane_bench")
BENCH_REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
SCRATCH = Path(tempfile.mkdtemp(prefix="paperlane-bench-"))


def bench_env(media_root: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{BENCH_DB}",
        REDIS_URL=BENCH_REDIS_URL,
        MEDIA_ROOT=media_root,
        SECRET_KEY="bench-secret",
        SECURE_SSL_REDIRECT="false",
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


os.environ.update(bench_env(str(SCRATCH / "media")))
django.setup()


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout


def fresh_database(env: dict[str, str]) -> None:
    """Drop and recreate the bench database, migrate it, flush the bench Redis db."""
    django.db.connections.close_all()  # the database is dropped with FORCE next
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')
    redis.Redis.from_url(BENCH_REDIS_URL).flushdb()
    manage(env, "migrate", "--no-input", "-v", "0")


def organisation_with_token(env: dict[str, str], slug: str, pages: int) -> str:
    manage(env, "create_org", slug, "--pages", str(pages))
    return manage(env, "create_api_token", slug).strip().splitlines()[-1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def format_counts(counts: dict) -> str:
    """{202: 30, 0: 1} -> "0x1 202x30"."""
    return " ".join(f"{k}x{v}" for k, v in sorted(counts.items()))


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
