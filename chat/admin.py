"""Chat in the admin, read-only: readers' feedback on answers, and the files they attached to conversations.

Tenancy as in the knowledge admin: superusers see every tenant; other staff see only the
feedback of tenants where they are admins (issue 34: feedback quotes answers from restricted documents),
and the tenant filter lists only those. Feedback is what readers chose to share with the
tenant's curators: the question, the answer, its citations and the retrieval settings.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from accounts.models import Role, Tenant
from accounts.selectors import tenants_for_user
from accounts.web import ReadOnlyAdmin, TenantFilter, TenantScopedAdmin, admin_excerpt, admin_time
from chat.models import Feedback
from knowledge.models import ConversationFile
from knowledge.rag import limits


@admin.register(Feedback)
class FeedbackAdmin(ReadOnlyAdmin, TenantScopedAdmin):
    """Thumbs up / down with comments, newest first; nothing here changes them (readers do, in the chat)."""

    # Issue 34: it shows what restricted documents say (or name them) without the per-document test.
    min_role = Role.ADMIN

    # Fits 1280 px beside the sidebars: the model and the full texts are on each feedback's own page.
    list_display = ["updated", "tenant", "rating", "question_preview", "comment_preview", "cited"]
    list_display_links = ["updated"]
    list_filter = ["rating", TenantFilter]
    list_select_related = ["tenant"]
    search_fields = ["question", "comment"]
    show_full_result_count = False
    ordering = ["-updated_at"]
    fields = ["tenant", "rating", "comment", "question", "answer", "citations_list", "retrieval", "model", "principal",
              "created_at", "updated_at"]
    readonly_fields = fields

    @admin.display(description="Updated", ordering="updated_at")
    def updated(self, obj: Feedback) -> str:
        return admin_time(obj.updated_at)

    @admin.display(description="Question")
    def question_preview(self, obj: Feedback) -> str:
        return admin_excerpt(obj.question, 90)

    @admin.display(description="Comment")
    def comment_preview(self, obj: Feedback) -> str:
        return admin_excerpt(obj.comment, 90)

    @admin.display(description="Cited")
    def cited(self, obj: Feedback) -> int:
        return len(obj.citations or [])

    @admin.display(description="Citations")
    def citations_list(self, obj: Feedback) -> str:
        if not obj.citations:
            return "None"
        return format_html("<ol>{}</ol>", format_html_join(
            "", "<li>{} (score {})</li>", ((c.get("chunk_id", "?"), c.get("score", "?")) for c in obj.citations)))


# --- Files attached to conversations (chat.files): existence and size, never their text --------------


@admin.register(ConversationFile)
class ConversationFileAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """The files readers attached to their conversations, for the admins of their tenant (superusers: all).

    Their passages are the conversation owner's alone: this list shows that they exist, their size,
    state and passage count, never their text, and nothing links to a page that would.
    """

    list_display = ["source_name", "conversation_tenant", "status", "size", "chunk_count", "created_at"]
    list_display_links = None
    list_select_related = ["tenant__private_to"]
    list_per_page = 100
    show_full_result_count = False
    ordering = ["-created_at", "-id"]

    def _tenants(self, request: HttpRequest) -> list[Tenant] | None:
        """Tenants whose conversations' files the user may see listed (None: every tenant, a superuser)."""
        user = request.user
        if not (user.is_active and user.is_staff):
            return []
        return None if user.is_superuser else tenants_for_user(user=user, min_role=Role.ADMIN)  # type: ignore[arg-type]

    def has_module_permission(self, request: HttpRequest) -> bool:
        tenants = self._tenants(request)
        return tenants is None or bool(tenants)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and self.has_module_permission(request)  # the list only: no page per file

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request).filter(tenant__private_to__isnull=False).only(
            "source_name", "status", "source_size", "chunk_count", "created_at", "tenant__private_to__slug",
        )
        tenants = self._tenants(request)
        return queryset if tenants is None else queryset.filter(tenant__private_to__in=tenants)

    @admin.display(description="Tenant")
    def conversation_tenant(self, obj: ConversationFile) -> str:
        return obj.tenant.private_to.slug if obj.tenant.private_to else ""

    @admin.display(description="Size", ordering="source_size")
    def size(self, obj: ConversationFile) -> str:
        return limits.describe_bytes(obj.source_size)
