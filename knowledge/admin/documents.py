"""The editors' documents in the admin: upload, edit, live progress, actions, chunks and the search playground.

Tenancy: superusers see everything; other staff see and change only documents of tenants
where they are editors or admins, and can only choose those tenants; staff who are only
readers get no access at all. Inside a tenant (issue 34) an editor sees only the documents they
may read (their access list names the whole tenant, them or a group of theirs); its admins see all. Every write goes through ``knowledge.services``; the pages
read through ``knowledge.selectors``. Counts come from ``Document.chunk_count``, never from
scanning the chunk table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django import forms
from django.contrib.admin.helpers import ActionForm
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from accounts.access import editable_tenants
from accounts.models import Group, Role
from accounts.selectors import group_ids_for, membership_role
from accounts.web import TenantFilter, TenantScopedAdmin, admin_time, admin_time_texts
from knowledge import rag
from knowledge.models import CorpusStat, Document, DocumentStatus
from knowledge.sources.models import Source
from knowledge.services.access import AccessError, access_describe, access_principals, document_access_set, is_restricted
from knowledge.services.documents import (
    DocumentInputError,
    DocumentNotReadable,
    document_cancel,
    document_delete_many,
    document_reindex,
    document_retry,
    document_text_save,
    document_update,
    document_upload_create,
)
from knowledge.services.file_ids import document_id_from_filename
from knowledge.forms import DocumentChangeForm, DocumentUploadForm, SearchForm, add_input_error
from knowledge.rag import limits
from knowledge.selectors import (
    PROGRESS_FIELDS,
    chunk_search,
    current_embedding_model,
    document_chunk_rows,
    tenant_model_subquery,
    document_display,
    document_list_label,
    document_progress,
)
from knowledge.services import state

CHUNKS_PER_PAGE = 25  # full texts: ~50,000 characters a page with the default chunker
MAX_PROGRESS_IDS = 200

# --- Documents ----------------------------------------------------------------------------------


def actor_of(request: HttpRequest) -> str:
    """How the audit trail names the admin user making a change."""
    return request.user.get_username()


def readable_by_staff(request: HttpRequest) -> Q | None:
    """The documents a staff user may read in the admin, once per request (None: a superuser, everything).

    Per editable tenant: all of them where the user is an admin; where an editor, those whose access list
    names the whole tenant, the user or one of their groups (read now: a membership change counts at once)."""
    cached = getattr(request, "_quarry_readable_documents", False)
    if cached is not False:
        return cached
    user = request.user
    found: Q | None = None
    if not user.is_superuser:
        found = Q(pk__in=[])
        for tenant in editable_tenants(request):
            if membership_role(user=user, tenant=tenant) == Role.ADMIN:
                found |= Q(tenant=tenant)
            else:
                found |= Q(tenant=tenant, access__overlap=rag.Reader(user.pk, group_ids_for(user=user, tenant=tenant)).principals)
    request._quarry_readable_documents = found  # type: ignore[attr-defined]
    return found


def staff_reader(request: HttpRequest, tenant: Any) -> rag.Reader | None:
    """The staff user as a reader of ``tenant`` (None: they read all of it, as its admin or a superuser)."""
    user = request.user
    if user.is_superuser or membership_role(user=user, tenant=tenant) == Role.ADMIN:
        return None
    return rag.Reader(user.pk, group_ids_for(user=user, tenant=tenant))


class RestrictedToGroupFilter(admin.SimpleListFilter):
    """"Restricted to group X": the documents whose access list names that group."""

    title = "restricted to group"
    parameter_name = "group"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        tenants = editable_tenants(request)
        groups = Group.objects.filter(tenant__in=tenants).select_related("tenant").order_by("tenant__slug", "name")
        several = len(tenants) > 1
        return [("whole", "Whole tenant (unrestricted)")] + [
            (str(g.pk), f"{g.tenant.slug}: {g.name}" if several else g.name) for g in groups
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == "whole":
            return queryset.filter(access__contains=["*"])
        if value and value.isdigit():
            return queryset.filter(access__contains=[f"g:{int(value)}"])
        return queryset


class AccessActionForm(ActionForm):
    """The fields the "set access" action reads: names, comma-separated (both empty: the whole tenant)."""

    access_groups = forms.CharField(required=False, label="Groups", help_text="comma-separated")
    access_users = forms.CharField(required=False, label="Users", help_text="comma-separated usernames")


def _names(value: str) -> list[str]:
    return [n.strip() for n in (value or "").split(",") if n.strip()]


@admin.register(Document)
class DocumentAdmin(TenantScopedAdmin):
    form = DocumentChangeForm
    action_form = AccessActionForm
    list_display = ["label", "tenant", "status_progress", "access_cell", "chunks", "version_cell", "model_cell", "updated"]
    list_display_links = ["label"]
    list_filter = ["status", TenantFilter, RestrictedToGroupFilter]
    list_select_related = ["tenant"]
    list_per_page = 50
    search_fields = ["external_id", "title", "source_name"]
    show_full_result_count = False  # one COUNT per page is enough
    actions = ["reindex_selected", "cancel_selected", "retry_selected", "set_access", "delete_documents"]
    readonly_fields = [
        "access_cell", "tenant_slug", "external_id", "status_progress", "error", "chunks_link", "embedding_model", "version", "source",
        "attempts", "requested_by", "queued_at", "started_at", "finished_at", "created_at", "updated_at",
    ]
    fieldsets = [
        (None, {"fields": ["tenant_slug", "external_id", "access_cell", "title", "uri", "metadata", "text", "replace_file"]}),
        ("Processing", {"fields": ["status_progress", "error", "chunks_link", "embedding_model", "version", "source",
                                   "attempts", "requested_by", "queued_at", "started_at", "finished_at", "created_at", "updated_at"]}),
    ]

    class Media:
        css = {"all": ["knowledge/admin/documents.css"]}
        js = ["knowledge/admin/documents.js"]

    def get_fieldsets(self, request: HttpRequest, obj: Document | None = None) -> list[tuple[str | None, dict[str, Any]]]:
        # A file's text is edited by replacing the file: DocumentChangeForm has no `text` field then,
        # and a fieldset naming a field the form lacks is a KeyError (a 500) on the change page.
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or not DocumentChangeForm.edits_text(obj):
            fieldsets = [(name, {**options, "fields": [f for f in options["fields"] if f != "text"]})
                         for name, options in fieldsets]
        if obj is not None and self.has_change_permission(request, obj):
            # Who may read it is edited here, in the form's two fields, instead of shown read-only.
            fieldsets = [(name, {**options, "fields": [g for f in options["fields"]
                                                       for g in (["access_groups", "access_users"] if f == "access_cell" else [f])]})
                         for name, options in fieldsets]
        return fieldsets

    # --- list columns ---------------------------------------------------------------------

    @admin.display(description="Document", ordering="external_id")
    def label(self, obj: Document) -> str:
        # documents.js replaces the text from the progress poll: processing can set the title (the file's own).
        return format_html('<span data-quarry-label="{}">{}</span>', obj.pk,
                           document_list_label(title=obj.title, source_name=obj.source_name, external_id=obj.external_id))

    @admin.display(description="Status", ordering="status")
    def status_progress(self, obj: Document) -> str:
        row = {field: getattr(obj, field) for field in PROGRESS_FIELDS}
        tenant_model = getattr(obj, "tenant_model", None)
        if tenant_model is None:  # a page whose queryset did not annotate it (the change form)
            tenant_model = CorpusStat.objects.filter(tenant_id=obj.tenant_id).values_list("embedding_model", flat=True).first()
        shown = document_display(row, current_model=tenant_model or self._current_model(), now=timezone.now())
        return format_html(
            '<div class="quarry-progress" data-quarry-doc="{}" data-status="{}" data-state="{}" data-url="{}" title="{}">'
            '<span class="quarry-progress-label">{}</span> <span class="quarry-progress-detail">{}</span>'
            '<span class="quarry-progress-track"><span class="quarry-progress-fill" data-percent="{}"></span></span>'
            '<span class="quarry-progress-error">{}</span>'
            '<span class="quarry-reindex"{}>re-index needed: embedded with another model than its tenant\'s</span></div>',
            obj.pk, obj.status, shown["state"], reverse("admin:knowledge_document_progress"), obj.error, shown["label"],
            shown["detail"], shown["percent"], obj.error if obj.status == DocumentStatus.FAILED else "",
            "" if shown["reindex_needed"] else mark_safe(" hidden"),
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # The tenant's embedding model, for "re-index needed" (one subquery, not one query per row).
        queryset = super().get_queryset(request).annotate(tenant_model=tenant_model_subquery())
        readable = readable_by_staff(request)
        return queryset if readable is None else queryset.filter(readable)

    def _allowed(self, request: HttpRequest, obj: Any = None) -> bool:
        # A document the editor may not read is, for them, not there (the change page 404s like a missing id).
        if not super()._allowed(request, obj):
            return False
        readable = readable_by_staff(request)
        return obj is None or readable is None or Document.objects.filter(readable, pk=obj.pk).exists()

    @admin.display(description="Access")
    def access_cell(self, obj: Document) -> str:
        if not is_restricted(obj.access):
            return "Whole tenant"
        names = access_describe(tenant=obj.tenant, principals=obj.access)
        return ", ".join([*(f"group {g}" for g in names["groups"]), *(f"user {u}" for u in names["users"])])

    @admin.action(description="Set access of selected documents (groups/users below; both empty: whole tenant)")
    def set_access(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        groups, users = _names(request.POST.get("access_groups", "")), _names(request.POST.get("access_users", ""))
        changed = 0
        by_tenant: dict[int, list[Document]] = {}
        for document in queryset.select_related("tenant"):
            by_tenant.setdefault(document.tenant_id, []).append(document)
        for documents in by_tenant.values():
            tenant = documents[0].tenant
            try:
                principals = access_principals(tenant=tenant, groups=groups, users=users)
            except AccessError as exc:
                self.message_user(request, f"{tenant.slug}: {exc.message}; nothing changed there.", messages.ERROR)
                continue
            changed += document_access_set(documents=documents, principals=principals, actor=actor_of(request))
        self.message_user(request, f"Access changed on {changed} document(s).", messages.SUCCESS if changed else messages.INFO)

    def _current_model(self) -> str | None:
        return current_embedding_model()

    @admin.display(description="Version", ordering="version")
    def version_cell(self, obj: Document) -> str:
        return format_html('<span data-quarry-version="{}">{}</span>', obj.pk, obj.version)

    @admin.display(description="Model", ordering="embedding_model")
    def model_cell(self, obj: Document) -> str:
        # Model ids are long ("local/bge-small-en-v1.5-int8"): cut to the column's width, whole in the tooltip.
        return format_html('<span class="quarry-model" data-quarry-model="{}" title="{}">{}</span>',
                           obj.pk, obj.embedding_model, obj.embedding_model or "—")

    @admin.display(description="Updated", ordering="updated_at")
    def updated(self, obj: Document) -> str:
        return admin_time(obj.updated_at, live=obj.pk)

    @admin.display(description="Tenant")
    def tenant_slug(self, obj: Document) -> str:
        return obj.tenant.slug  # plain text: editors cannot open the tenant admin

    @admin.display(description="Chunks", ordering="chunk_count")
    def chunks(self, obj: Document) -> str:
        url = reverse("admin:knowledge_document_chunks", args=[obj.pk])
        return format_html('<a href="{}" data-quarry-chunks="{}">{}</a>', url, obj.pk, obj.chunk_count)

    @admin.display(description="Chunks")
    def chunks_link(self, obj: Document) -> str:
        url = reverse("admin:knowledge_document_chunks", args=[obj.pk])
        return format_html('<a href="{}">{} chunk{} searchable: view them</a>', url, obj.chunk_count, "" if obj.chunk_count == 1 else "s")

    @admin.display(description="Source")
    def source(self, obj: Document) -> str:
        synced = self._synced_from(obj)
        if synced is not None:
            return synced
        if obj.source_file or obj.source_name:
            return f"{obj.source_name} ({obj.source_size:,} bytes)" if obj.source_size else obj.source_name
        if obj.source_text:
            return "Pasted text"
        return "Text sent through the API" if obj.text else "—"

    @staticmethod
    def _synced_from(obj: Document) -> str | None:
        """A document a source wrote: which source (linked to its admin page) and the item's path there."""
        key = obj.metadata.get("source") if isinstance(obj.metadata, dict) else None
        synced = Source.objects.filter(tenant_id=obj.tenant_id, key=key).first() if isinstance(key, str) else None
        if synced is None:
            return None
        return format_html('Synced from <a href="{}">{}</a> ({}): {}', reverse("admin:sources_source_change", args=[synced.pk]),
                           synced.name, synced.kind, obj.metadata.get("path", ""))

    # --- add (upload), change, delete ------------------------------------------------------------

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return self.upload_view(request)

    def upload_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        tenants = editable_tenants(request)
        form = DocumentUploadForm(request.POST or None, request.FILES or None, tenants=tenants)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            # An editor replaces only documents they may read (issue 34), as the API's writes do.
            reader = staff_reader(request, data["tenant"])
            readable = None if reader is None else list(reader.principals)
            try:
                if data["files"]:
                    documents = document_upload_create(
                        tenant=data["tenant"], files=data["files"], actor=actor_of(request),
                        document_ids=[data["external_id"]] if data["external_id"] else None,
                        title=data["title"], uri=data["uri"], metadata=data["metadata"], readable=readable,
                    )
                else:
                    external_id = data["external_id"] or document_id_from_filename(data["title"])
                    documents = [document_text_save(
                        tenant=data["tenant"], external_id=external_id, text=data["text"], actor=actor_of(request),
                        title=data["title"], uri=data["uri"], metadata=data["metadata"], readable=readable,
                    )]
            except DocumentInputError as exc:
                add_input_error(form, exc)
            except DocumentNotReadable:
                form.add_error("external_id", "This id is taken by a document you may not read: choose another id.")
            else:
                self._report_upload(request, documents)
                return HttpResponseRedirect(reverse("admin:knowledge_document_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts, "title": "Upload documents", "form": form,
            "max_bytes": limits.describe_bytes(settings.QUARRY_UPLOAD_MAX_BYTES), "has_view_permission": True,
        }
        return TemplateResponse(request, "admin/knowledge/document/upload.html", context)

    def _report_upload(self, request: HttpRequest, documents: Sequence[Document]) -> None:
        queued = [d for d in documents if d.status != DocumentStatus.FAILED]
        if queued:
            names = ", ".join(state.document_label(d) for d in queued[:10]) + ("…" if len(queued) > 10 else "")
            self.message_user(request, f"Queued {len(queued)} document{'s' if len(queued) != 1 else ''} for processing: {names}. "
                              "The list below updates while they are processed.", messages.SUCCESS)
        for document in documents:
            if document.status == DocumentStatus.FAILED:
                self.message_user(request, document.error, messages.ERROR)

    def save_model(self, request: HttpRequest, obj: Document, form: Any, change: bool) -> None:
        data = form.cleaned_data
        queued = document_update(
            document=obj, actor=actor_of(request), title=data["title"], uri=data["uri"], metadata=data["metadata"],
            text=data.get("text") if "text" in form.fields else None, upload=data.get("replace_file") or None,
        )
        if form.access_changed():
            document_access_set(documents=[obj], principals=form.access_principals(), actor=actor_of(request))
        obj.refresh_from_db()
        if queued:
            self.message_user(request, f"A new version of {state.document_label(obj)} is queued for processing.", messages.INFO)
        elif obj.status == DocumentStatus.FAILED and data.get("replace_file"):
            self.message_user(request, obj.error, messages.ERROR)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[list[str], dict[str, int], set[str], list[str]]:
        # Django would collect every chunk to list it; the counts are already on the documents.
        documents = list(objs)
        chunk_total = sum(d.chunk_count for d in documents)
        listed = [f"{state.document_label(d)} ({d.chunk_count} chunks)" for d in documents]
        return listed, {"documents": len(documents), "chunks": chunk_total}, set(), []

    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        document_delete_many(documents=[obj], actor=actor_of(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        document_delete_many(documents=list(queryset.select_related("tenant")), actor=actor_of(request))

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # it would list every chunk; delete_documents does not
        return actions

    # --- actions (each calls one service) ---------------------------------------------------------

    @admin.action(description="Re-index selected documents", permissions=["change"])
    def reindex_selected(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        count = document_reindex(documents=queryset, actor=actor_of(request))
        self.message_user(request, f"Queued {count} document{'s' if count != 1 else ''} for re-indexing.", messages.SUCCESS)

    @admin.action(description="Cancel queued or running work", permissions=["change"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        result = document_cancel(documents=queryset, actor=actor_of(request))
        parts = []
        if result.cancelled:
            parts.append(f"cancelled {result.cancelled}")
        if result.stopping:
            parts.append(f"asked {result.stopping} running to stop (the previous version stays searchable)")
        if result.not_running:
            parts.append(f"{result.not_running} had nothing to cancel")
        self.message_user(request, "; ".join(parts).capitalize() + ".", messages.SUCCESS if result.cancelled or result.stopping else messages.WARNING)

    @admin.action(description="Retry failed documents", permissions=["change"])
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        count = document_retry(documents=queryset, actor=actor_of(request))
        skipped = queryset.count() - count
        message = f"Queued {count} failed document{'s' if count != 1 else ''} again."
        if skipped:
            message += f" {skipped} had not failed and were left alone."
        self.message_user(request, message, messages.SUCCESS if count else messages.WARNING)

    @admin.action(description="Delete selected documents and their chunks", permissions=["delete"])
    def delete_documents(self, request: HttpRequest, queryset: QuerySet[Document]) -> TemplateResponse | None:
        documents = list(queryset.select_related("tenant"))
        if request.POST.get("post") == "yes":
            count = document_delete_many(documents=documents, actor=actor_of(request))
            self.message_user(request, f"Deleted {count} document{'s' if count != 1 else ''} and their chunks.", messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts, "title": "Delete documents?", "documents": documents,
            "chunk_total": sum(d.chunk_count for d in documents), "action_name": "delete_documents",
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/knowledge/document/delete_documents.html", context)

    # --- extra pages -----------------------------------------------------------------------------

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("progress/", wrap(self.progress_view), name="knowledge_document_progress"),
            path("search/", wrap(self.search_view), name="knowledge_document_search"),
            path("<int:object_id>/chunks/", wrap(self.chunks_view), name="knowledge_document_chunks"),
            *super().get_urls(),
        ]

    def progress_view(self, request: HttpRequest) -> JsonResponse:
        """``?ids=1,2,3`` -> status and progress of those documents the user may see (for the live list)."""
        if not self.has_view_permission(request):
            return JsonResponse({"error": "forbidden", "detail": "You cannot see documents."}, status=403)
        try:
            ids = [int(part) for part in request.GET.get("ids", "").split(",") if part.strip()][:MAX_PROGRESS_IDS]
        except ValueError:
            return JsonResponse({"error": "invalid", "detail": "ids must be comma-separated integers."}, status=400)
        rows = document_progress(documents=self.get_queryset(request), ids=ids)
        labels = dict(DocumentStatus.choices)
        return JsonResponse({"documents": [
            {**row, "status_label": labels[row["status"]], "updated_at": row["updated_at"].isoformat(),
             "updated": admin_time_texts(row["updated_at"]),
             "eta_at": row["eta_at"].isoformat() if row["eta_at"] else None}
            for row in rows
        ]})

    def chunks_view(self, request: HttpRequest, object_id: int) -> TemplateResponse:
        document = get_object_or_404(self.get_queryset(request), pk=object_id)
        if not self.has_view_permission(request, document):
            raise PermissionDenied
        pages = max(1, math.ceil(document.chunk_count / CHUNKS_PER_PAGE))
        try:
            page = min(max(1, int(request.GET.get("page", "1"))), pages)
        except ValueError:
            page = 1
        start = (page - 1) * CHUNKS_PER_PAGE
        rows = list(document_chunk_rows(tenant=document.tenant, document=document)[start : start + CHUNKS_PER_PAGE])
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts, "title": f"Chunks of {state.document_label(document)}", "document": document, "rows": rows,
            "page": page, "pages": pages, "has_view_permission": True,
            "previous_page": page - 1 if page > 1 else None, "next_page": page + 1 if page < pages else None,
        }
        return TemplateResponse(request, "admin/knowledge/document/chunks.html", context)

    def search_view(self, request: HttpRequest) -> TemplateResponse:
        """Run a query as readers would, and show the ranked hits with their scores."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        tenants = editable_tenants(request)
        form = SearchForm(request.GET if "query" in request.GET else None, tenants=tenants)
        hits: list[dict[str, Any]] = []
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            try:
                found = chunk_search(
                    tenant=data["tenant"], query=data["query"], mode=data["mode"], limit=data["limit"],
                    filters=data["filters"], min_score=data["min_score"], reader=staff_reader(request, data["tenant"]),
                )
            except (rag.RAGValidationError, rag.RAGTypeError) as exc:
                field = exc.field.split(".", 1)[0]
                form.add_error(field if field in form.fields else None, f"{exc.field}: {exc.message}")
            except rag.RAGError as exc:
                form.add_error(None, f"Search failed: {exc}")
            else:
                pks = dict(Document.objects.filter(tenant=data["tenant"], external_id__in={h.chunk.document_id for h in found})
                           .values_list("external_id", "pk"))
                hits = [
                    {"rank": rank, "hit": hit, "document_pk": pks.get(hit.chunk.document_id),
                     "metadata": json.dumps(dict(hit.chunk.metadata), ensure_ascii=False)}
                    for rank, hit in enumerate(found, 1)
                ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts, "title": "Search playground", "form": form, "hits": hits,
            "searched": form.is_bound and not form.errors, "has_view_permission": True,
        }
        return TemplateResponse(request, "admin/knowledge/document/search.html", context)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra = {"search_url": reverse("admin:knowledge_document_search"), **(extra_context or {})}
        return super().changelist_view(request, extra)

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra = {**(extra_context or {})}
        if object_id.isdigit():
            extra["chunks_url"] = reverse("admin:knowledge_document_chunks", args=[int(object_id)])
        return super().change_view(request, object_id, form_url, extra)
