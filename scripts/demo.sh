#!/usr/bin/env bash
# Zero-config demo: PostgreSQL embedded (or DATABASE_URL's), files under ./media, Redis
# started if none answers. Ctrl+C stops the web, the workers and what this script started.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
source scripts/redis.sh

export DEBUG="${DEBUG:-true}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
PORT="${PORT:-8000}"
# The demo's connected folder: the one folder of this machine the demo may read.
DEMO_FOLDER="${DEMO_FOLDER:-$PWD/demo-folder}"
export PAPERLANE_LOCAL_FOLDER_ROOTS="${PAPERLANE_LOCAL_FOLDER_ROOTS:-$DEMO_FOLDER}"

WORKERS=""
EMBEDDED_POSTGRES=""
stop_all() {
    if [ -n "$WORKERS" ]; then
        kill -TERM "$WORKERS" 2>/dev/null || true
        wait "$WORKERS" 2>/dev/null || true
    fi
    if [ -n "$EMBEDDED_POSTGRES" ]; then
        "$PY" scripts/embedded_postgres.py stop && echo "Stopped the embedded PostgreSQL."
    fi
    stop_started_redis
}
trap stop_all EXIT
trap 'exit 0' INT TERM

if [ -n "${DATABASE_URL:-}" ]; then
    echo "Using the PostgreSQL of DATABASE_URL."
else
    echo "Starting the embedded PostgreSQL with pgvector (data in var/postgres, a Unix socket there, no network port)."
    EMBEDDED_POSTGRES=1
    DATABASE_URL="$("$PY" scripts/embedded_postgres.py start)"
    export DATABASE_URL
fi
ensure_redis_of_url "$REDIS_URL"
"$PY" manage.py migrate --no-input -v 0
"$PY" manage.py demo_setup --port "$PORT"
mkdir -p "$DEMO_FOLDER"
if "$PY" manage.py connect_folder demo "$DEMO_FOLDER" >/dev/null; then
  echo "  Connected folder  $DEMO_FOLDER   (PDF and .docx files put there are imported)"
else
  echo "  The demo folder $DEMO_FOLDER is not connected (see above); the rest runs."
fi
echo

# Workers (every stage, the scheduler and the sweeper) beside the web server; Ctrl+C
# stops both, the workers finishing their current stage first.
"$PY" manage.py run_workers &
WORKERS=$!
"$PY" manage.py runserver "127.0.0.1:$PORT" --noreload
