"""The operator's admin on a big history: the runs list, a run page, the dashboard, /metrics.

    .venv/bin/python bench/admin.py [--runs 100000] [--repeats 5]

Creates a fresh PostgreSQL database (`paperlane_bench`, or BENCH_DB), migrates it and
writes RUNS import runs with about five stage attempts each (500,000 for 100,000 runs),
their transitions, reservations, documents and ledger rows, straight in SQL
(bench/_admin_data.py). Then it renders admin pages through Django's test client as a
staff member of the Operators group (not a superuser, so permission checks are real),
in this process, against that database and the bench Redis db (empty: every due run's
job is missing, the worst case for the "stuck" filter). Prints the median of REPEATS
renders per page (after one warm-up), the number of SQL queries and rows shown.
Target: every page under 300 ms on two cores.
"""

import argparse
import re
import time

from _admin_data import load
from _common import SCRATCH, bench_env, fresh_database, median, print_table
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from documents.models import Organisation
from documents.services.organisations import member_add, organisation_create
from pipeline.models import ImportRun, StageAttempt

TARGET_MS = 300
ORGANISATIONS = 20


def cases() -> list[tuple[str, str]]:
    """(label, URL) of every page measured, with ids taken from the loaded data."""
    runs = "/admin/pipeline/importrun/"
    org = Organisation.objects.order_by("id").values_list("id", flat=True)[7]
    sample = ImportRun.objects.filter(status="succeeded").order_by("created_at")[5000]
    dead = (
        ImportRun.objects.filter(status="dead_letter", error_code="transient_error")
        .order_by("created_at")
        .first()
    )
    name = sample.document.filename
    return [
        ("runs: no filter", runs),
        ("runs: page 50", f"{runs}?p=50"),
        ("runs: status=dead_letter", f"{runs}?status__exact=dead_letter"),
        ("runs: status=succeeded", f"{runs}?status__exact=succeeded"),
        ("runs: stage=store", f"{runs}?stage__exact=store"),
        ("runs: organisation", f"{runs}?organisation__id__exact={org}"),
        ("runs: source=connector", f"{runs}?source__exact=connector"),
        ("runs: priority=bulk", f"{runs}?priority__exact=bulk"),
        ("runs: error code", f"{runs}?error_code=extract_cpu_limit"),
        ("runs: stuck (any)", f"{runs}?stuck=any"),
        ("runs: stuck, no progress", f"{runs}?stuck=no_progress"),
        ("runs: stuck, lease expired", f"{runs}?stuck=lease_expired"),
        ("runs: stuck, no job in Redis", f"{runs}?stuck=no_job"),
        (
            "runs: dead_letter + stage + code",
            f"{runs}?status__exact=dead_letter&stage__exact=embed&error_code=poison",
        ),
        ("runs: sorted by time in stage", f"{runs}?o=9"),
        ("search: run id", f"{runs}?q={sample.id}"),
        ("search: document id", f"{runs}?q={sample.document_id}"),
        ("search: run id prefix", f"{runs}?q={str(sample.id)[:8]}"),
        ("search: document name", f"{runs}?q={name}"),
        ("search: name fragment", f"{runs}?q=contract-20"),
        ("search: organisation slug", f"{runs}?q=bench-07"),
        ("search: error text", f"{runs}?q=cross-reference"),
        ("run page (dead letter, 5 attempts)", f"{runs}{dead.id}/change/"),
        ("run page (succeeded)", f"{runs}{sample.id}/change/"),
        ("dead letter groups", f"{runs}dead-letter/"),
        ("group retry confirmation", f"{runs}dead-letter/retry/?error_code=poison&stage=embed"),
        ("attempts: no filter", "/admin/pipeline/stageattempt/"),
        (
            "attempts: outcome=transient_error",
            "/admin/pipeline/stageattempt/?outcome__exact=transient_error",
        ),
        ("attempts: stage=embed", "/admin/pipeline/stageattempt/?stage__exact=embed"),
        (
            "attempts: error type",
            "/admin/pipeline/stageattempt/?error_type=pypdf.errors.PdfReadError",
        ),
        ("pipeline dashboard", "/admin/pipeline/"),
        ("/metrics", "/metrics"),
    ]


def measure(client: Client, url: str, repeats: int) -> tuple[float, float, int, int]:
    """Median and worst ms over `repeats` renders (after a warm-up), queries, rows."""
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    timings = []
    for _ in range(repeats):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url)
            timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    body = response.content.decode()
    rows = len(re.findall(r'<tr[^>]*>\s*<td class="action-checkbox', body)) or len(
        re.findall(r"<tr", body)
    )
    return median(timings), max(timings), len(queries), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--reuse", action="store_true", help="measure the database a previous run loaded"
    )
    args = parser.parse_args()

    started = time.perf_counter()
    if not args.reuse:
        fresh_database(bench_env(str(SCRATCH / "media")))
        orgs = [
            organisation_create(slug=f"bench-{n:02d}", page_limit=100_000_000)
            for n in range(ORGANISATIONS)
        ]
        load(runs=args.runs, organisation_ids=[o.id for o in orgs])
        member_add(organisation=orgs[0], username="operator", password="bench-operator", staff=True)
    loaded = time.perf_counter() - started
    client = Client(HTTP_HOST="localhost")
    assert client.login(username="operator", password="bench-operator")

    rows = []
    for label, url in cases():
        med, worst, queries, shown = measure(client, url, args.repeats)
        flag = "" if med < TARGET_MS else "  <-- over target"
        rows.append([label, f"{med:.1f}", f"{worst:.1f}", str(queries), str(shown) + flag])
    print(
        f"\nOperator admin: {ImportRun.objects.count():,} runs, "
        f"{StageAttempt.objects.count():,} attempts (loaded in {loaded:.0f} s); "
        f"median of {args.repeats} renders, test client, staff user, PostgreSQL\n"
    )
    print_table(["page", "median ms", "max ms", "queries", "rows"], rows)
    worst = max(float(r[1]) for r in rows)
    print(f"\nslowest median {worst:.1f} ms (target < {TARGET_MS} ms)")


if __name__ == "__main__":
    main()
