"""Redis settings that lose queued jobs, checked by `run_workers` at start.

`redis_config_warnings` decides from the values CONFIG GET returned (a pure
function); `redis_check` asks the server. The database stays the truth either
way (the sweeper delivers again whatever Redis lost), but an evicted or
forgotten queue means a backlog waits for the sweeper instead of moving.
"""

from collections.abc import Mapping

from redis import Redis
from redis.exceptions import RedisError, ResponseError

# What the check reads; CONFIG GET answers each name with its value.
CHECKED = ("maxmemory-policy", "maxmemory", "appendonly", "save")


def redis_config_warnings(config: Mapping[str, str]) -> list[str]:
    """The warnings for a Redis whose CONFIG GET gave `config` (names to values)."""
    warnings = []
    policy = config.get("maxmemory-policy")
    if policy is None:
        warnings.append(
            "Could not read Redis' maxmemory-policy; make sure it is noeviction, "
            "or a full Redis may drop queued jobs."
        )
    elif policy != "noeviction":
        when = (
            " (maxmemory is 0, so only once a memory limit is set)"
            if config.get("maxmemory") == "0"
            else ""
        )
        warnings.append(
            f"Redis maxmemory-policy is {policy}: a full Redis evicts keys, queued jobs "
            f"among them{when}. Set maxmemory-policy noeviction (redis.conf, or "
            "CONFIG SET maxmemory-policy noeviction): a full Redis then refuses new jobs, "
            "which the sweeper delivers later, instead of silently dropping old ones."
        )
    appendonly, save = config.get("appendonly"), config.get("save")
    if appendonly is None or save is None:
        warnings.append(
            "Could not read Redis' persistence settings (appendonly, save); make sure "
            "appendonly is yes, or a restart empties every queue."
        )
    elif appendonly != "yes" and not save.strip():
        warnings.append(
            "Redis keeps nothing on disk (appendonly no, no save rules): a restart empties "
            "every queue, and the backlog waits until the sweeper has delivered it again "
            "from the database. Set appendonly yes and appendfsync everysec (redis.conf, or "
            "CONFIG SET appendonly yes): a restart then loses at most a second."
        )
    return warnings


def redis_check(connection: Redis) -> list[str]:
    """Ask Redis for the settings that lose jobs; the warnings, or why it could not check."""
    where = _address(connection)
    config: dict[str, str] = {}
    try:
        for name in CHECKED:
            config.update(_text(connection.config_get(name)))
    except ResponseError as exc:
        # Managed services (ElastiCache, Memorystore, Upstash…) refuse or rename CONFIG.
        return [
            f"Could not check Redis at {where}: CONFIG GET was refused ({exc}). Make sure "
            "its maxmemory-policy is noeviction and it persists to disk (AOF, "
            "appendfsync everysec) in your provider's settings."
        ]
    except RedisError as exc:
        return [
            f"Could not reach Redis at {where} to check its settings ({exc}); the workers "
            "keep trying to connect."
        ]
    return redis_config_warnings(config)


def _text(values: Mapping) -> dict[str, str]:
    return {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in values.items()
    }


def _address(connection: Redis) -> str:
    # Host, port and database only: the URL may carry a password.
    kwargs = connection.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
