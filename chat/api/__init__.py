"""Chat and the retrieval agent over HTTP (DRF, plus async views for completions).

``admission`` (DRF's access rules for the async views, the closed request bodies),
``chat`` (chat sessions and completions; the responses every endpoint here shares),
``agent`` (agent sessions, completions, resume). URLs: ``config/urls.py``.
"""
