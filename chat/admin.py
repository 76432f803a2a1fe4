"""Chat in the admin: readers' feedback on answers, per tenant, read-only.

Tenancy as in the knowledge admin: superusers see every tenant; other staff see only the
feedback of tenants where they are editors or admins (``accounts.access.editable_tenants``),
and the tenant filter lists only those. Feedback is what readers chose to share with the
tenant's curators: the question, the answer, its citations and the retrieval settings.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from accounts.access import editable_tenants
from chat.models import Feedback


class _TenantFilter(admin.SimpleListFilter):
    title = "tenant"
    parameter_name = "tenant"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(t.pk), t.slug) for t in editable_tenants(request)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(tenant_id=self.value()) if self.value() else queryset


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    """Thumbs up / down with comments, newest first; nothing here changes them (readers do, in the chat)."""

    list_display = ["updated_at", "tenant", "rating", "question_preview", "comment_preview", "cited", "model"]
    list_filter = ["rating", _TenantFilter]
    list_select_related = ["tenant"]
    search_fields = ["question", "comment"]
    show_full_result_count = False
    ordering = ["-updated_at"]
    fields = ["tenant", "rating", "comment", "question", "answer", "citations_list", "retrieval", "model", "principal",
              "created_at", "updated_at"]
    readonly_fields = fields

    def _allowed(self, request: HttpRequest, obj: Feedback | None = None) -> bool:
        user = request.user
        if not (user.is_active and user.is_staff):
            return False
        if user.is_superuser:
            return True
        tenant_ids = {t.pk for t in editable_tenants(request)}
        return bool(tenant_ids) and (obj is None or obj.tenant_id in tenant_ids)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Feedback]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(tenant__in=editable_tenants(request))

    @admin.display(description="Question")
    def question_preview(self, obj: Feedback) -> str:
        return obj.question if len(obj.question) <= 90 else obj.question[:89] + "…"

    @admin.display(description="Comment")
    def comment_preview(self, obj: Feedback) -> str:
        return obj.comment if len(obj.comment) <= 90 else obj.comment[:89] + "…"

    @admin.display(description="Citations")
    def cited(self, obj: Feedback) -> int:
        return len(obj.citations or [])

    @admin.display(description="Citations")
    def citations_list(self, obj: Feedback) -> str:
        if not obj.citations:
            return "None"
        return format_html("<ol>{}</ol>", format_html_join(
            "", "<li>{} (score {})</li>", ((c.get("chunk_id", "?"), c.get("score", "?")) for c in obj.citations)))
