"""Conversations: a session per caller and its turns. Every row carries its tenant.

Memory is read back only into the prompt of the same session; turns are never
indexed for retrieval.
"""

from __future__ import annotations

import secrets

from django.db import models
from django.db.models import Q


def new_session_id() -> str:
    """``session-`` + 22 url-safe characters (128 random bits): unguessable, so ids can travel in URLs."""
    return f"session-{secrets.token_urlsafe(16)}"


class SessionKind(models.TextChoices):
    CHAT = "chat", "Chat"
    AGENT = "agent", "Agent"


class TurnRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"


class ChatSessionQuerySet(models.QuerySet["ChatSession"]):
    def owned_by(self, *, tenant_id: int, principal: str) -> ChatSessionQuerySet:
        """The sessions one caller may use: their own, in that tenant."""
        return self.filter(tenant_id=tenant_id, principal=principal)

    def of_kind(self, kind: SessionKind | str) -> ChatSessionQuerySet:
        return self.filter(kind=kind)


class ChatSession(models.Model):
    """A conversation of one principal (``TenantContext.principal``) in one tenant."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="chat_sessions")
    principal = models.CharField(max_length=100)
    public_id = models.CharField(max_length=40, unique=True, default=new_session_id, editable=False)
    kind = models.CharField(max_length=8, choices=SessionKind.choices, default=SessionKind.CHAT)
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ChatSessionQuerySet.as_manager()

    class Meta:
        indexes = [
            # A caller's sessions, newest first (the web chat's session list).
            models.Index(fields=["tenant", "principal", "-updated_at"], name="chatsession_owner_recent"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(public_id__startswith="session-"), name="chatsession_public_id_prefix"),
        ]

    def __str__(self) -> str:
        return self.public_id


class Turn(models.Model):
    """One message of a conversation. Only completed exchanges are stored (a user turn and its answer)."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="turns")
    role = models.CharField(max_length=16, choices=TurnRole.choices)
    content = models.TextField()
    citations = models.JSONField(default=list, blank=True)  # [{document_id, chunk_id, score}] in retrieval order
    usage = models.JSONField(default=dict, blank=True)  # {prompt_tokens, completion_tokens, total_tokens}
    model = models.CharField(max_length=300, blank=True)  # "<provider>/<provider model>" that answered
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # The latest turns of a session, newest first (conversation memory, transcripts).
            models.Index(fields=["session", "-id"], name="turn_session_latest"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(role__in=TurnRole.values), name="turn_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.role}:{self.pk}"
