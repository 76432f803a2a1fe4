"""Chat in the admin: readers' feedback on answers, per tenant, read-only.

Tenancy as in the knowledge admin: superusers see every tenant; other staff see only the
feedback of tenants where they are editors or admins (``accounts.access.editable_tenants``),
and the tenant filter lists only those. Feedback is what readers chose to share with the
tenant's curators: the question, the answer, its citations and the retrieval settings.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from accounts.web import ReadOnlyAdmin, TenantFilter, TenantScopedAdmin, admin_excerpt, admin_time
from chat.models import Feedback


@admin.register(Feedback)
class FeedbackAdmin(ReadOnlyAdmin, TenantScopedAdmin):
    """Thumbs up / down with comments, newest first; nothing here changes them (readers do, in the chat)."""

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
