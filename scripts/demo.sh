#!/usr/bin/env bash
# Zero-config demo: PostgreSQL embedded (or DATABASE_URL's), files under ./media, Redis
# started if none answers. Ctrl+C stops the web, the workers and what this script started.
# The workers log to var/demo-workers.log; the last lines printed are the addresses, the
# credentials and this start's API token (then only the web server's request lines).
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

WORKERS_LOG="var/demo-workers.log"

WORKERS=""
SERVER=""
EMBEDDED_POSTGRES=""
stop_all() {
    for pid in $SERVER $WORKERS; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$EMBEDDED_POSTGRES" ]; then
        "$PY" scripts/embedded_postgres.py stop && echo "Stopped the embedded PostgreSQL."
    fi
    stop_started_redis
}
trap stop_all EXIT
trap 'exit 0' INT TERM

# Whether something accepts connections on 127.0.0.1:$PORT (a bare connection: the web
# server logs no request for it).
port_answers() {
    "$PY" -c "import socket; socket.create_connection(('127.0.0.1', $PORT), timeout=1).close()" \
        2>/dev/null
}

if port_answers; then
    echo "Port $PORT is already in use; run the demo on another one, e.g. PORT=8001 make demo." >&2
    exit 1
fi
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
# Kept to be printed last: the token this start made (the previous start's is revoked).
CREDENTIALS="$("$PY" manage.py demo_setup --port "$PORT")"
mkdir -p "$DEMO_FOLDER" var
if "$PY" manage.py connect_folder demo "$DEMO_FOLDER" >/dev/null; then
    FOLDER="  Connected folder  $DEMO_FOLDER   (PDF, .docx, PNG, JPEG and TIFF files put there are imported)"
else
    FOLDER="  The demo folder $DEMO_FOLDER is not connected (see above); the rest runs."
fi

# Workers (every stage, the scheduler and the sweeper) beside the web server; Ctrl+C
# stops both, the workers finishing their current stage first.
echo "Starting the workers (their log: $WORKERS_LOG) and the web server."
"$PY" manage.py run_workers >"$WORKERS_LOG" 2>&1 &
WORKERS=$!
PYTHONUNBUFFERED=1 "$PY" manage.py runserver "127.0.0.1:$PORT" --noreload &
SERVER=$!
for _ in $(seq 1 300); do
    port_answers && break
    if ! kill -0 "$SERVER" 2>/dev/null; then
        echo "The web server did not start (see above)." >&2
        exit 1
    fi
    sleep 0.2
done
if ! port_answers; then
    echo "The web server did not answer on 127.0.0.1:$PORT within a minute." >&2
    exit 1
fi
echo
echo "$FOLDER"
echo "$CREDENTIALS"
echo
wait "$SERVER"
