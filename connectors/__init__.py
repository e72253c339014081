"""Connected folders: each connection, what its syncs found (`models.py`), the
providers that list a folder's changes and fetch a file's bytes (`local.py`,
`onedrive*.py`), the sync that records each file version once and starts its run
(`sync.py`, `loop.py`), and connected folders as a source of runs for the pipeline
(`source.py`, registered in `apps.py`). Imports `pipeline` and the layers below it.
"""
