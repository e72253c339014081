"""Shared by every app: the domain error type (`errors`) and the schema the API renders it
with (`schemas`), one-statement inserts (`inserts`) and text fit to store (`text`).

The lowest layer: it imports neither `documents` nor `jobs`.
"""
