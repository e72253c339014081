"""Reads for operators: what the pipeline is doing, has done and was asked to do.

One set of selectors feeds both the pipeline dashboard (`operations/dashboard.py`)
and `/metrics` (`operations/metrics.py`), so both show the same numbers:

- `snapshot`: each stage now (queues, runs, rates, durations), the workers,
  stuck runs and the pages each organisation holds; `rq_state` reads Redis for it;
- `totals`: counters that only go up (attempts by outcome and error, retries,
  a duration histogram), kept cheap by a rollup in Redis;
- `history`: the last hour minute by minute (throughput; each stage's lag is
  sampled by pipeline/lag.py);
- `attention`: what an operator should look at, in words.

Uploads accepted and refused are counted by core/upload_counts.py. Every number is
an aggregate in SQL or a pipelined Redis read; nothing loads runs one by one.
"""
