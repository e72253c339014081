"""The burst's webhooks (`--webhooks`): a receiver on loopback, an endpoint of each
organisation subscribed to every event, and, once the runs have ended, what it was told:
one `run.*` event for each ended run, none lost, none doubled, each signature valid."""

import json
import time
from collections import defaultdict
from datetime import UTC, datetime

from _common import percentile
from django.conf import settings
from django.db import close_old_connections
from standardwebhooks import Webhook

from documents.models import Organisation
from pipeline.models import ImportRun
from pipeline.services.transitions import Actor
from webhooks.models import SUBSCRIBABLE
from webhooks.services import endpoint_create

ALLOWED = "127.0.0.0/8"


def endpoints_create(url: str, organisation_ids: list[int]) -> dict[str, str]:
    """An endpoint of each organisation, every event: its secret by organisation slug."""
    settings.PAPERLANE_WEBHOOK_ALLOWED_NETWORKS = [ALLOWED]
    secrets = {}
    for organisation in Organisation.objects.filter(id__in=organisation_ids):
        _, secret = endpoint_create(
            organisation=organisation,
            url=url,
            events=list(SUBSCRIBABLE),
            actor=Actor("bench", operator=True),
            description="the burst's receiver",
        )
        secrets[organisation.slug] = secret
    return secrets


def _signed(request, secrets) -> dict | None:
    """The body if one of `secrets` signed it as the specification says (its timestamp's
    age left out: the bench reads what was received minutes ago), else None."""
    headers = request.headers
    try:
        at = datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)
        sent = headers["webhook-signature"].split(" ")
        for secret in secrets.values():
            expected = Webhook(secret).sign(
                msg_id=headers["webhook-id"], timestamp=at, data=request.body
            )
            if expected in sent:
                return json.loads(request.body)
    except (KeyError, ValueError):
        return None
    return None


def _told(received, secrets) -> tuple[dict[str, set], dict[str, float], int, int]:
    """Per run id, the event ids that told of its end; when each was received; requests
    that repeated an event id (a try whose answer was lost); bad signatures."""
    events, at, repeats, bad, seen = defaultdict(set), {}, 0, 0, set()
    for request in received:
        body = _signed(request, secrets)
        if body is None:
            bad += 1
            continue
        if body["id"] in seen:
            repeats += 1
            continue
        seen.add(body["id"])
        if body["type"].startswith("run."):
            events[body["data"]["run_id"]].add(body["id"])
            at[body["data"]["run_id"]] = request.at
    return events, at, repeats, bad


def webhook_figures(script, secrets, run_ids: list[str], *, wait: float) -> dict:
    """Wait (at most `wait` s) until every ended run was told, then what was."""
    close_old_connections()
    ended = dict(
        ImportRun.objects.filter(id__in=run_ids, finished_at__isnull=False).values_list(
            "id", "finished_at"
        )
    )
    ended = {str(k): v for k, v in ended.items()}
    deadline = time.monotonic() + wait
    while True:
        with script.lock:
            received = list(script.received)
        events, at, repeats, bad = _told(received, secrets)
        if set(ended) <= set(events) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    missing = [run for run in ended if run not in events]
    doubled = [run for run, ids in events.items() if len(ids) > 1]
    lags = [at[run] - finished.timestamp() for run, finished in ended.items() if run in at]
    return {
        "webhook_requests": len(received),
        "webhook_runs_ended": len(ended),
        "webhook_runs_told": sum(1 for run in ended if run in events),
        "webhook_runs_missing": len(missing),
        "webhook_runs_doubled": len(doubled),
        "webhook_repeated_tries": repeats,
        "webhook_bad_signatures": bad,
        "webhook_lag_p50_s": percentile(lags, 50),
        "webhook_lag_p99_s": percentile(lags, 99),
        "webhook_checked_at": datetime.now(UTC).isoformat(),
    }


def webhook_criterion(f: dict) -> tuple[str, bool, str]:
    ok = (
        f["webhook_runs_told"] == f["webhook_runs_ended"]
        and f["webhook_runs_doubled"] == 0
        and f["webhook_bad_signatures"] == 0
    )
    return (
        "one signed run.* event per ended run, none lost or doubled",
        ok,
        f"{f['webhook_runs_told']}/{f['webhook_runs_ended']} told, doubled "
        f"{f['webhook_runs_doubled']}, bad signatures {f['webhook_bad_signatures']}, tries "
        f"repeated {f['webhook_repeated_tries']}",
    )
