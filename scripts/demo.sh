#!/usr/bin/env bash
# Zero-config demo: SQLite, files under ./media, Redis started if none answers.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
source scripts/redis.sh

export DEBUG="${DEBUG:-true}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
PORT="${PORT:-8000}"

ensure_redis 127.0.0.1 6379
"$PY" manage.py migrate --no-input -v 0
"$PY" manage.py demo_setup --port "$PORT"

# Workers (every stage, the scheduler and the sweeper) beside the web server;
# Ctrl+C stops both, the workers finishing their current stage first.
"$PY" manage.py run_workers &
WORKERS=$!
trap 'kill -TERM $WORKERS 2>/dev/null; wait $WORKERS 2>/dev/null' EXIT
trap 'exit 0' INT TERM
"$PY" manage.py runserver "127.0.0.1:$PORT" --noreload
