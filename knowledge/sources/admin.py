"""The Sources pages of the admin: add, edit, pause, sync now, remove; each source's syncs with counts and errors.

Tenancy as everywhere in the admin (``accounts.web.TenantScopedAdmin``): staff see and change only
sources of tenants where they are editors or admins. Every write goes through ``knowledge.sources.services``;
the form checks the configuration (and reaches the source) before anything is stored.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from accounts.access import TenantContext, tenant_context_for_user
from accounts.models import Role, Tenant
from accounts.selectors import membership_role
from accounts.web import TenantFilter, TenantScopedAdmin, tenant_choices
from knowledge.sources.connectors.base import ConfigError
from knowledge.sources.models import Source, SourceSync
from knowledge.sources.selectors import latest_syncs, source_status, sync_errors_for
from knowledge.sources.services.editing import (
    UNSET, check_name, check_name_free, check_schedule, source_access_check, source_access_names, source_config_check, source_create, source_delete, source_secret_names, source_update,
)
from knowledge.sources.services.registry import kinds
from knowledge.sources.services.syncing import SourceGone, source_sync_request


class SourceForm(forms.ModelForm):
    kind = forms.ChoiceField(choices=[])
    config = forms.JSONField(widget=forms.Textarea(attrs={"rows": 8, "cols": 80}), help_text=(
        'The kind\'s settings as JSON, e.g. {"url": "https://docs.example.com/"} (web), {"url": "https://git.example.com/org/repo.git", '
        '"branch": "main"} (git), {"path": "/srv/share/team"} (folder), {"bucket": "handbook", "prefix": "kb/"} (s3). '
        "Secrets (web: authorization; s3: secret_access_key) are stored encrypted and not shown: leave them out to keep them."))

    access_groups = forms.CharField(required=False, label="Access: groups", help_text=(
        "Who may read the documents it writes: groups (comma-separated) and users below; both empty: the whole tenant. "
        "A change applies at once to the documents it wrote."))
    access_users = forms.CharField(required=False, label="Access: users", help_text="Usernames, comma-separated.")

    class Meta:
        model = Source
        fields = ["tenant", "name", "kind", "config", "schedule_minutes", "enabled"]

    def __init__(self, *args: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = [(k, k) for k in kinds()]
        if request is not None and "tenant" in self.fields:
            self.fields["tenant"].queryset = tenant_choices(request)
        if self.instance.pk:
            self.fields["kind"].disabled = True
            self.fields["tenant"].disabled = True
            names = source_access_names(self.instance)
            self.initial.setdefault("access_groups", ", ".join(names["groups"]))
            self.initial.setdefault("access_users", ", ".join(names["users"]))
            if request is not None and not _is_tenant_admin(request, self.instance.tenant):
                # Shown, not changed: a change reaches restricted documents the editor may not read (issue 34).
                self.fields["access_groups"].disabled = self.fields["access_users"].disabled = True

    def access(self) -> dict[str, list[str]]:
        """The access list the form asks for, by names."""
        split = lambda value: [n.strip() for n in (value or "").split(",") if n.strip()]  # noqa: E731
        return {"groups": split(self.cleaned_data.get("access_groups")), "users": split(self.cleaned_data.get("access_users"))}

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        try:
            name = check_name(data.get("name"))
            tenant = data.get("tenant") or self.instance.tenant
            check_name_free(tenant_id=tenant.pk, name=name, source=self.instance if self.instance.pk else None)
            check_schedule(data.get("schedule_minutes"))
            source_access_check(tenant, self.access())
            if not self.instance.pk or data.get("config") != self.instance.config:
                source_config_check(source=self.instance if self.instance.pk else None, kind=data["kind"], config=data.get("config"))
        except ConfigError as exc:
            field = exc.field.split(".", 1)[0]
            self.add_error(field if field in self.fields else None, exc.message if field == exc.field else f"{exc.field}: {exc.message}")
        return data


@admin.action(description="Sync now")
def sync_now(modeladmin: SourceAdmin, request: HttpRequest, queryset: QuerySet[Source]) -> None:
    queued = 0
    for source in queryset:
        try:
            queued += source_sync_request(source=source, trigger="manual")
        except SourceGone:
            continue
    modeladmin.message_user(request, f"{queued} sync(s) queued; {queryset.count() - queued} merged into one already queued or running.")


@admin.action(description="Pause (the schedule skips them)")
def pause(modeladmin: SourceAdmin, request: HttpRequest, queryset: QuerySet[Source]) -> None:
    for source in queryset:
        source_update(source=source, enabled=False, actor=request.user.get_username())
    modeladmin.message_user(request, f"{queryset.count()} source(s) paused.")


@admin.action(description="Resume")
def resume(modeladmin: SourceAdmin, request: HttpRequest, queryset: QuerySet[Source]) -> None:
    for source in queryset:
        source_update(source=source, enabled=True, actor=request.user.get_username())
    modeladmin.message_user(request, f"{queryset.count()} source(s) resumed.")


class SyncInline(admin.TabularInline):
    model = SourceSync
    extra = 0
    max_num = 0
    can_delete = False
    ordering = ["-started_at"]
    fields = ["status", "trigger", "started_at", "finished_at", "listed", "added", "updated", "unchanged", "deleted", "failed", "error_list"]
    readonly_fields = fields
    verbose_name_plural = "Syncs (newest first)"

    @admin.display(description="errors")
    def error_list(self, sync: SourceSync) -> str:
        if not sync.errors:
            return "-"
        errors, withheld = sync_errors_for(source=sync.source, errors=sync.errors, context=_viewer_context(sync.source.tenant))
        shown = errors[:10]
        more = f" and {len(errors) - 10} more" if len(errors) > 10 else ""
        if withheld:
            more += f" ({withheld} withheld: they name items of documents you may not read)"
        return format_html("<ul>{}</ul>{}", format_html_join("", "<li><code>{}</code>: {}</li>",
                                                              ((e.get("item") or "(listing)", e.get("reason")) for e in shown)), more)

    def get_queryset(self, request: HttpRequest) -> QuerySet[SourceSync]:
        return super().get_queryset(request).order_by("-started_at")

    # Shown on the source's page, which SourceAdmin already scopes to the user's tenants (roles,
    # not Django's model permissions); syncs are written by the sync only.
    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# Who is viewing a source's page, for its syncs' errors (an inline's display sees the row only): set by
# SourceAdmin.change_view around its rendering, with the contexts read so far by tenant id.
_viewer: ContextVar[tuple[Any, dict[int, TenantContext | None]] | None] = ContextVar("quarry_source_viewer", default=None)


def _viewer_context(tenant: Tenant) -> TenantContext | None:
    """The viewer's context in ``tenant`` (None, and so no error shown, outside a source's page)."""
    viewer = _viewer.get()
    if viewer is None:
        return None
    user, contexts = viewer
    if tenant.pk not in contexts:
        contexts[tenant.pk] = tenant_context_for_user(user=user, slug=tenant.slug)
    return contexts[tenant.pk]


@admin.register(Source)
class SourceAdmin(TenantScopedAdmin):
    form = SourceForm
    list_display = ["name", "tenant", "kind", "enabled", "schedule_minutes", "state", "last_counts"]
    list_filter = [TenantFilter, "kind", "enabled"]
    list_select_related = ["tenant"]
    search_fields = ["name", "key"]
    actions = [sync_now, pause, resume]
    readonly_fields = ["state", "key", "secret_names", "created_by", "created_at"]

    class Media:
        js = ["sources/admin/live.js"]  # reloads the list while a sync runs (no inline script: the CSP)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)

        class WithRequest(form):  # type: ignore[misc,valid-type]
            def __init__(self, *args: Any, **kw: Any) -> None:
                super().__init__(*args, request=request, **kw)

        return WithRequest

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None) -> Any:
        # Rendered here, while the viewer is known: the syncs' errors show only what the viewer may read.
        token = _viewer.set((request.user, {}))
        try:
            response = super().change_view(request, object_id, form_url, extra_context)
            if hasattr(response, "render"):
                response.render()
            return response
        finally:
            _viewer.reset(token)

    def get_inlines(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        return [SyncInline] if obj is not None else []  # a new source has no syncs yet

    def get_queryset(self, request: HttpRequest) -> QuerySet[Source]:
        return super().get_queryset(request).filter(deleting=False)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        response = super().changelist_view(request, extra_context)
        rows = getattr(response, "context_data", {}).get("cl")
        if rows is not None:
            self._latest = latest_syncs(list(rows.result_list))
        return response

    def _last(self, source: Source) -> SourceSync | None:
        latest = getattr(self, "_latest", None)
        if latest is None or source.pk not in latest:
            return latest_syncs([source]).get(source.pk)
        return latest[source.pk]

    @admin.display(description="status")
    def state(self, source: Source) -> str:
        value = source_status(source, self._last(source))
        return format_html('<span class="source-status" data-status="{}">{}</span>', value, value)

    @admin.display(description="last sync")
    def last_counts(self, source: Source) -> str:
        last = self._last(source)
        if last is None:
            return "-"
        return (f"{last.started_at:%Y-%m-%d %H:%M}: +{last.added} ~{last.updated} ={last.unchanged} -{last.deleted}"
                + (f" failed {last.failed}" if last.failed else "") + (f" (listed {last.listed})" if last.status == "running" else ""))

    @admin.display(description="secrets stored")
    def secret_names(self, source: Source) -> str:
        return ", ".join(source_secret_names(source)) or "-"

    def save_model(self, request: HttpRequest, obj: Source, form: forms.ModelForm, change: bool) -> None:
        actor = request.user.get_username()
        data = form.cleaned_data
        # The form has checked and probed the configuration already.
        if change:
            config = data["config"] if "config" in form.changed_data else UNSET
            # A change of the access list reaches every document the source wrote, restricted ones included
            # (issue 34): the tenant's admins only; an editor's form shows it disabled.
            access = form.access() if _is_tenant_admin(request, obj.tenant) else UNSET
            saved = source_update(source=obj, name=data["name"], config=config, schedule_minutes=data.get("schedule_minutes"),
                                  enabled=data["enabled"], actor=actor, probe=False, access=access)
        else:
            saved = source_create(tenant=data["tenant"], name=data["name"], kind=data["kind"], config=data["config"],
                                  schedule_minutes=data.get("schedule_minutes"), enabled=data["enabled"], actor=actor, probe=False,
                                  access=form.access())
        obj.__dict__.update(saved.__dict__)  # the admin logs and redirects to the saved row

    def delete_model(self, request: HttpRequest, obj: Source) -> None:
        source_delete(source=obj, actor=request.user.get_username())
        messages.info(request, f"{obj.name}: its documents are being deleted in the background.")

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        for source in queryset:
            source_delete(source=source, actor=request.user.get_username())

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # Not the cascade of every sync and item row (thousands): the documents go in the background.
        names = [f"{o.name} (and its documents, in the background)" for o in objs]
        return names, {"sources": len(names)}, set(), []


def _is_tenant_admin(request: HttpRequest, tenant: Tenant) -> bool:
    """Whether ``request.user`` may change ``tenant``'s access lists (a superuser, or the tenant's admin)."""
    return bool(request.user.is_superuser) or membership_role(user=request.user, tenant=tenant) == Role.ADMIN
