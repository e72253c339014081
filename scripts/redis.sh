# Sourced by demo.sh and test.sh: make sure a Redis answers at $REDIS_HOST:$REDIS_PORT.
ensure_redis() {
    local host="${1:-127.0.0.1}" port="${2:-6379}"
    if "$PY" -c "import redis,sys; redis.Redis(host='$host', port=$port, socket_timeout=1).ping()" 2>/dev/null; then
        return 0
    fi
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "Paperlane needs Redis and none answers on $host:$port." >&2
        echo "Install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis)" >&2
        echo "or point REDIS_URL at a running Redis, then run this again." >&2
        return 1
    fi
    mkdir -p var
    echo "Starting redis-server on $host:$port (data is not persisted; log in var/redis.log)"
    redis-server --daemonize yes --bind "$host" --port "$port" --save "" --appendonly no \
        --dir "$PWD/var" --logfile "$PWD/var/redis.log"
    for _ in $(seq 1 50); do
        "$PY" -c "import redis; redis.Redis(host='$host', port=$port).ping()" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "redis-server did not start; see var/redis.log" >&2
    return 1
}
