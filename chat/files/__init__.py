"""Files attached to a conversation: a private store per session (``chat.models.SessionFiles``).

``selectors`` reads (the store of a session, its files); ``services`` writes (attach, delete,
drop with the session, expire idle ones). The files go through the knowledge base's own
pipeline (``knowledge.services.documents``: extraction, chunking and embedding by the
django-q2 workers) into a namespace of their own, ``accounts.Tenant.private_to``.
"""
