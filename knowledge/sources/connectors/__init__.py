"""Connectors: one module per kind of source, each implementing ``base.Connector``.

Registered by dotted path in ``settings.QUARRY_SOURCE_CONNECTORS``; a new kind is one module here
(or anywhere importable) plus its tests. Connectors know nothing of tenants, documents or the
database: they list and fetch, and the sync service (``knowledge.sources.services``) decides the rest.
"""
