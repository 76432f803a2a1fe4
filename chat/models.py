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
    # The last turn of the thread shown as the conversation (see ``Turn``); None: no turn yet.
    head = models.ForeignKey("chat.Turn", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
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
    """One message of a conversation. Only completed exchanges are stored (a user turn and its answer).

    The turns of a session form a tree through ``parent``, the turn this one follows:
    an answer's parent is the question it answers; a question's parent is the answer it
    follows (None for a first question). Turns of one role sharing a parent are
    *versions* of each other: answers regenerated for one question, or a question edited
    and resent (with the answers that followed). Nothing is ever overwritten or dropped:
    ``ChatSession.head`` names the last turn of the thread shown as the conversation, and
    the thread is ``head`` and its ancestors; choosing another version moves ``head``
    to the newest turn below it (``chat.services.chat_turn_select``). Memory given to
    the model follows the thread only.
    """

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="turns")
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="children")
    role = models.CharField(max_length=16, choices=TurnRole.choices)
    content = models.TextField()
    citations = models.JSONField(default=list, blank=True)  # [{document_id, chunk_id, score}] in retrieval order
    usage = models.JSONField(default=dict, blank=True)  # {prompt_tokens, completion_tokens, total_tokens}
    model = models.CharField(max_length=300, blank=True)  # "<provider>/<provider model>" that answered
    # Answers: how their passages were retrieved ({mode, fusion, fusion_weight, graph_search, top_k,
    # min_similarity, embedding_model}), kept so feedback can say what was judged.
    retrieval = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # The latest turns of a session, newest first (conversation memory, transcripts).
            models.Index(fields=["session", "-id"], name="turn_session_latest"),
        ]
        # (parent's own index, made for the foreign key, serves versions and subtrees: WHERE parent_id = ...)
        constraints = [
            models.CheckConstraint(condition=Q(role__in=TurnRole.values), name="turn_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.role}:{self.pk}"


class FeedbackRating(models.TextChoices):
    UP = "up", "Thumbs up"
    DOWN = "down", "Thumbs down"


FEEDBACK_COMMENT_MAX_CHARS = 2000


class Feedback(models.Model):
    """A reader's judgement of one answer (at most one per answer; giving it again replaces it): a chat
    answer (``turn``) or an agent run's (``run``), exactly one of them.

    ``question``, ``citations`` and ``retrieval`` are copies taken when the feedback is
    given: what was judged stays known even if the documents change later. Deleting the
    conversation deletes its feedback (the question is the reader's words).
    """

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="feedback")
    turn = models.OneToOneField(Turn, on_delete=models.CASCADE, related_name="feedback", null=True, blank=True)
    run = models.OneToOneField("chat.AgentRun", on_delete=models.CASCADE, related_name="feedback", null=True, blank=True)
    principal = models.CharField(max_length=100)
    rating = models.CharField(max_length=8, choices=FeedbackRating.choices)
    comment = models.TextField(blank=True)
    question = models.TextField()
    answer = models.TextField(blank=True)
    citations = models.JSONField(default=list, blank=True)  # the answer's [{document_id, chunk_id, score}]
    retrieval = models.JSONField(default=dict, blank=True)  # the answer's retrieval settings (Turn.retrieval)
    model = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "feedback"
        indexes = [
            # A tenant's feedback, newest first (the admin list, export_feedback).
            models.Index(fields=["tenant", "-updated_at"], name="feedback_tenant_recent"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(rating__in=FeedbackRating.values), name="feedback_rating_valid"),
            models.CheckConstraint(condition=Q(turn__isnull=False, run__isnull=True) | Q(turn__isnull=True, run__isnull=False),
                                   name="feedback_one_answer"),
        ]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} on {self.session_id}:{self.turn_id or self.run_id}"


# --- the retrieval agent ----------------------------------------------------------------------


def new_run_id() -> str:
    """``run-`` + 22 url-safe characters (128 random bits), like session ids."""
    return f"run-{secrets.token_urlsafe(16)}"


class RunStatus(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"  # finished: cannot be resumed
    STOPPED = "stopped", "Stopped"  # stopped before finishing: can be resumed


class StopReason(models.TextChoices):
    COMPLETED = "completed", "Completed"  # the model answered on its own
    MAX_STEPS = "max_steps", "Step budget spent"
    REPEATED_CALL = "repeated_call", "Repeated tool call"
    TOKEN_BUDGET = "token_budget", "Token budget spent"
    TIMEOUT = "timeout", "Timed out"
    PROVIDER_ERROR = "provider_error", "Model provider failed"
    CANCELLED = "cancelled", "Client went away"


class AgentRunQuerySet(models.QuerySet["AgentRun"]):
    def owned_by(self, *, tenant_id: int, principal: str) -> AgentRunQuerySet:
        """The runs one caller may see: those of their own sessions, in that tenant."""
        return self.filter(tenant_id=tenant_id, session__principal=principal)


class AgentRun(models.Model):
    """One question to the retrieval agent, its tool-using steps and its outcome.

    ``messages`` is the conversation after the system prompt (memory, the
    question, each step's tool calls and results), saved after every completed
    step, so a stopped run continues where it stopped. ``steps`` is the
    readable log of the same steps; ``sources`` numbers every chunk a tool
    returned (the only chunks an answer may cite).
    """

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="agent_runs")
    public_id = models.CharField(max_length=40, unique=True, default=new_run_id, editable=False)
    prompt = models.TextField()
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING)
    stop_reason = models.CharField(max_length=16, choices=StopReason.choices, blank=True)
    error = models.CharField(max_length=40, blank=True)  # the normalized error code of a failed invocation
    max_steps = models.PositiveSmallIntegerField(default=4)  # the step budget of the latest invocation
    graph_search = models.BooleanField(default=False)
    steps = models.JSONField(default=list, blank=True)  # [{step, turn, calls: [{id, tool, arguments, ok, error?, chunk_ids}]}]
    messages = models.JSONField(default=list, blank=True)  # OpenAI-format messages without the system prompt
    sources = models.JSONField(default=list, blank=True)  # [{source, chunk_id, document_id, score}] in order of discovery
    answer = models.TextField(blank=True)
    citations = models.JSONField(default=list, blank=True)  # [{document_id, chunk_id, score}] in order of citation
    usage = models.JSONField(default=dict, blank=True)  # the whole run's {prompt_tokens, completion_tokens, total_tokens}
    turns = models.PositiveIntegerField(default=0)  # model calls over the whole run
    tool_call_count = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=300, blank=True)  # "<provider>/<provider model>" of the latest turn
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = AgentRunQuerySet.as_manager()

    class Meta:
        indexes = [
            # A session's runs, newest first (the agent's conversation memory, transcripts).
            models.Index(fields=["session", "-id"], name="agentrun_session_latest"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(public_id__startswith="run-"), name="agentrun_public_id_prefix"),
            models.CheckConstraint(condition=Q(status__in=RunStatus.values), name="agentrun_status_valid"),
            models.CheckConstraint(
                condition=Q(stop_reason="") | Q(stop_reason__in=StopReason.values), name="agentrun_stop_reason_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.public_id

    @property
    def resumable(self) -> bool:
        """Stopped before finishing (max_steps, timeout, provider_error, cancelled, or a failure): it may continue."""
        return self.status == RunStatus.STOPPED


# --- files attached to a conversation (chat.files) --------------------------------------------


class SessionFiles(models.Model):
    """The private store holding a conversation's attached files (``accounts.Tenant.private_to``).

    The files are documents of ``store``, processed by the knowledge base's own pipeline; only
    this link leads to them, so only the session's owner reaches them. Deleting the store (its
    documents first: ``chat.files.services.session_files_drop``) deletes this row by cascade.
    """

    session = models.OneToOneField(ChatSession, on_delete=models.CASCADE, related_name="file_store")
    store = models.OneToOneField("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"files of {self.session_id}"
