#!/usr/bin/env bash
# The checks and the tests, on PostgreSQL and a Redis database of its own (db 15); pytest's
# arguments pass through (`make test-fast` adds -m "not slow" -n 2).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || { echo "No $PY: run 'make install' first (or 'make test', which does)." >&2; exit 1; }
source scripts/redis.sh

export DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/paperlane}"
export REDIS_URL="${TEST_REDIS_URL:-redis://127.0.0.1:6379/15}"

ensure_redis_of_url "$REDIS_URL"
# The server's own database answers whatever the test database is called.
"$PY" -c "import psycopg, os; psycopg.connect(os.environ['DATABASE_URL'].rsplit('/', 1)[0] + '/postgres', connect_timeout=3).close()" || {
    echo "PostgreSQL does not answer at $DATABASE_URL; start it or set TEST_DATABASE_URL." >&2
    exit 1
}
# TEST_CHECKS=0: the tests alone (`make test` runs the checks once, before its first part).
if [ "${TEST_CHECKS:-1}" != 0 ]; then
    .venv/bin/ruff check .
    # The apps' layers, the siblings' independence and no Django or RQ in the file parsers
    # (pyproject.toml), then no import cycle between any two modules, imports inside
    # functions included.
    .venv/bin/lint-imports --no-cache
    "$PY" scripts/import_cycles.py
fi
exec "$PY" -m pytest "$@"
