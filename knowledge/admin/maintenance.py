"""The knowledge base's upkeep in the admin: the audit trail, each tenant's search language, embedding
model moves (``manage.py reembed``) and the shared search indexes' health and rebuilds."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.html import format_html

from accounts.models import Role
from accounts.web import ReadOnlyAdmin, TenantFilter, TenantScopedAdmin, admin_time, tenant_choices
from knowledge.admin.documents import actor_of
from knowledge.models import AuditEvent, EmbeddingMigration, EmbeddingMigrationStatus, IndexRebuild, SearchLanguage
from knowledge.services import index_health, reembedding, text_search


# --- Audit trail ----------------------------------------------------------------------------------


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin, TenantScopedAdmin):
    """Who changed what: read-only."""

    # Issue 34: it shows what restricted documents say (or name them) without the per-document test.
    min_role = Role.ADMIN

    list_display = ["when", "tenant", "action", "actor", "trigger", "documents", "chunk_count"]
    list_filter = ["action", "trigger", TenantFilter]
    list_select_related = ["tenant"]
    show_full_result_count = False
    search_fields = ["actor"]

    @admin.display(description="At", ordering="at")
    def when(self, obj: AuditEvent) -> str:
        return admin_time(obj.at)  # to the minute: the default format rounds an audit trail to the hour ("7 p.m.")

    @admin.display(description="Documents")
    def documents(self, obj: AuditEvent) -> str:
        shown = ", ".join(obj.document_ids[:5])
        return shown + (f" and {len(obj.document_ids) - 5} more" if len(obj.document_ids) > 5 else "")


# --- Text search language (stemming and stop words per tenant) ---------------------------------------


@admin.register(SearchLanguage)
class SearchLanguageAdmin(TenantScopedAdmin):
    """A tenant's keyword search language. Saving a new one queues the re-index of the tenant's keyword
    data (``knowledge.services.text_search``); searches use the old language until it completes."""

    list_display = ["tenant", "language", "index_language", "requested_at", "applied_at", "error"]
    list_filter = [TenantFilter]
    list_select_related = ["tenant"]
    fields = ["tenant", "language", "index_language", "requested_at", "applied_at", "error"]
    readonly_fields = ["index_language", "requested_at", "applied_at", "error"]

    def get_readonly_fields(self, request: HttpRequest, obj: SearchLanguage | None = None) -> list[str]:
        return self.readonly_fields + (["tenant"] if obj is not None else [])

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = tenant_choices(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="Index uses")
    def index_language(self, obj: SearchLanguage) -> str:
        if obj.pk is None:
            return "-"
        state_now = text_search.search_language_state(tenant=obj.tenant)
        return f"{state_now.active} (re-indexing)" if state_now.reindexing else state_now.active

    def save_model(self, request: HttpRequest, obj: SearchLanguage, form: Any, change: bool) -> None:
        text_search.search_language_set(tenant=obj.tenant, language=obj.language)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the row is the tenant's setting: change it instead


# --- Embedding model moves (manage.py reembed) ---------------------------------------------------------


class EmbeddingMigrationForm(forms.ModelForm):
    """Start a move: the tenant and the model (the names ``QUARRY_EMBEDDING_MODEL`` takes)."""

    target_name = forms.ChoiceField(label="Model", choices=())

    class Meta:
        model = EmbeddingMigration
        fields = ["tenant", "target_name"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = list(dict.fromkeys([*settings.LOCAL_EMBEDDERS, str(settings.QUARRY_EMBEDDING_MODEL).lower()]))
        self.fields["target_name"].choices = [(name, name) for name in names if name != "none"]


@admin.register(EmbeddingMigration)
class EmbeddingMigrationAdmin(TenantScopedAdmin):
    """Moves of a tenant's vectors to another embedding model, with their progress. Adding one starts
    it (``knowledge.services.reembedding``: the worker embeds every chunk, searches keep the old
    vectors until the switch); a running one can be cancelled. Finished moves are the record."""

    form = EmbeddingMigrationForm
    list_display = ["tenant", "source_model", "target_model", "status", "progress", "started_at", "updated_at", "finished_at", "error"]
    list_filter = ["status", TenantFilter]
    list_select_related = ["tenant"]
    actions = ["cancel_selected"]

    def get_fields(self, request: HttpRequest, obj: EmbeddingMigration | None = None) -> list[str]:
        if obj is None:
            return ["tenant", "target_name"]
        return ["tenant", "source_model", "target_model", "status", "progress", "requested_by", "started_at", "updated_at",
                "finished_at", "error"]

    def get_readonly_fields(self, request: HttpRequest, obj: EmbeddingMigration | None = None) -> list[str]:
        return [] if obj is None else self.get_fields(request, obj)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = tenant_choices(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="Progress")
    def progress(self, obj: EmbeddingMigration) -> str:
        return format_html(
            '<div class="quarry-progress"><span class="quarry-progress-label">{} / {} ({}%)</span>'
            '<span class="quarry-progress-track"><span class="quarry-progress-fill" data-percent="{}"></span></span></div>',
            f"{obj.done:,}", f"{obj.total:,}", obj.percent, obj.percent,
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the record of a move; cancel a running one instead

    def save_model(self, request: HttpRequest, obj: EmbeddingMigration, form: Any, change: bool) -> None:
        created = reembedding.reembed_start(tenant=obj.tenant, model=form.cleaned_data["target_name"], actor=actor_of(request))
        obj.pk = created.pk
        obj.refresh_from_db()

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None) -> HttpResponse:
        try:
            return super().add_view(request, form_url, extra_context)
        except reembedding.ReembedError as exc:
            self.message_user(request, str(exc), level=messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    @admin.action(description="Cancel the selected running moves")
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[EmbeddingMigration]) -> None:
        stopped = 0
        for migration in queryset.filter(status=EmbeddingMigrationStatus.RUNNING).select_related("tenant"):
            stopped += reembedding.reembed_cancel(tenant=migration.tenant) is not None
        self.message_user(request, f"{stopped} move{'s' if stopped != 1 else ''} cancelled; their staged vectors were dropped.")


# --- The shared search indexes: health and rebuilds ---------------------------------------------------


@admin.register(IndexRebuild)
class IndexRebuildAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """Superusers only (the indexes are shared by every tenant): each watched index's size, live rows,
    bloat and last rebuild above the list of past rebuilds. Rebuilds run from the schedule or
    ``manage.py index_health --reindex`` (a concurrent reindex can outlast a page request)."""

    list_display = ["index_name", "trigger", "started_at", "seconds", "size_before", "size_after", "live_rows", "bloat_before", "error"]
    list_filter = ["index_name", "trigger"]
    show_full_result_count = False

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)


    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        context = {**(extra_context or {}), "index_health": index_health.index_health_report(),
                   "rebuild_bound": index_health.rebuild_bound()}
        return super().changelist_view(request, context)
