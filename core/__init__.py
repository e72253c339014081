"""Plain pieces every app shares, knowing none of them: the domain error type
(`errors`), one-statement inserts (`inserts`), text fit to store (`text`), the
bounded child processes (`isolation`), pooled Redis clients (`redis`), the shared
breaker of an outside provider (`provider_breaker`), how an upload request is read
(`uploads`, `upload_counts`) and the base of the management commands (`commands`).

The lowest layer: it imports no other app (`lint-imports` keeps it so).
"""
