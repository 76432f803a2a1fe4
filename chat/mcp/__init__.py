"""Quarry's knowledge base as a Model Context Protocol server: the retrieval tools (``tools``), the SDK
server (``server``), ``/mcp`` over streamable HTTP (``http``); stdio is ``manage.py mcp``."""
