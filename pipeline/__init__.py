"""The pipeline, and everything that joins documents with their runs.

Import runs, their stage attempts and transitions (`models.py`); the stage
list (`pipeline.py`) and stage bodies (`stages/`); the engine that claims and
runs a stage (`engine.py`), delivery through RQ (`dispatch.py`, `queues.py`),
leases, retries, the sweeper and the `run_workers` supervisor; run services
(`services/`: accept, workers, sweeper, people); the upload pages and the
documents and runs API; the operator's admin. Uses `documents`, which never
imports this app.
"""
