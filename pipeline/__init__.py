"""The pipeline: what happens to an accepted document until it is charged.

Runs, their stage attempts and history (`models.py`); the stage list
(`stage_list.py`) and stage bodies (`stages/`); the engine that claims and runs a
stage (`engine.py`); delivery through RQ and its callbacks (`dispatch.py`,
`queues.py`, `lanes.py`); leases, retries, the sweeper and the `run_workers`
supervisor; the run services (`services/`: accept, admission, the one transition
action, workers, people, deletion, direct uploads). Where a run's file comes from,
other than an upload, is a source another app registers (`sources.py`). Imports
`retrieval`, `documents` and `core`, never the apps above it.
"""
