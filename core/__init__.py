"""Shared by every app: the domain error type and the schema the API renders it with.

The lowest layer: it imports neither `documents` nor `jobs`.
"""
