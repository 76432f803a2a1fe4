"""The editors' admin, one module per concern (importing them registers their ModelAdmins):
``documents`` (upload, edit, live progress, actions, chunks, the search playground),
``maintenance`` (the audit trail, search languages, embedding model moves, index health) and
``graph`` (the entity browser).

Tenancy: superusers see everything; other staff see and change only documents of tenants
where they are editors or admins, and can only choose those tenants; staff who are only
readers get no access at all. Every write goes through ``knowledge.services``; the pages
read through ``knowledge.selectors``.
"""

from knowledge.admin import documents, graph, maintenance  # noqa: F401
