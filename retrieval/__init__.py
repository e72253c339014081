"""Finding things in documents: text cleaning and chunking (`chunking.py`), embedding
providers and their rate limit (`embedding.py`), and search (`search.py`). Imports
`documents` and `core`.
"""
