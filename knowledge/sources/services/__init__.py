"""Writes and workflows of sources.

- ``registry``: the connector kinds (``QUARRY_SOURCE_CONNECTORS``) and the checking of a configuration.
- ``editing``: create, change, pause and remove sources (removal deletes their documents in the background).
- ``syncing``: request a sync (one at a time per source; a second request merges), run it, and
  the dispatcher that starts scheduled syncs.

Documents are written only through ``knowledge.services.documents``, the knowledge base's write door.
"""
