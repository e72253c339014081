"""What operators work with: the admin for every app's records (`admin/`), the
pipeline dashboard (`dashboard.py`, `charts.py`), the reads behind both and
`/metrics` (`stats/`, `selectors.py`, `metrics.py`). A sibling of `web` and `api`:
none of the three imports another.
"""
