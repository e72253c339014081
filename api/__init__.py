"""The JSON API's routers (mounted on the one NinjaAPI in config/api.py): documents,
runs, search, direct uploads, quota and tokens, with their schemas and the bearer
token authentication. Thin callers of the services. A sibling of `web` and
`operations`: none of the three imports another.
"""
