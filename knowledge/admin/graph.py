"""The knowledge graph in the admin: an entity browser (read-only)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from accounts.models import Role
from accounts.web import ReadOnlyAdmin, TenantFilter, TenantScopedAdmin
from knowledge.models import Entity
from knowledge.selectors import entity_mentions, entity_neighbors


# --- The knowledge graph: an entity browser ---------------------------------------------------------


@admin.register(Entity)
class EntityAdmin(ReadOnlyAdmin, TenantScopedAdmin):
    """A tenant's entities (read-only: the graph follows the chunks): each with its mentions and its neighbours."""

    # Issue 34: it shows what restricted documents say (or name them) without the per-document test.
    min_role = Role.ADMIN

    list_display = ["name", "tenant", "type", "chunk_count", "defined_count"]
    list_filter = ["type", TenantFilter]
    list_select_related = ["tenant"]
    list_per_page = 100
    search_fields = ["normalized", "name"]
    show_full_result_count = False
    ordering = ["-chunk_count", "id"]
    fields = ["tenant_slug", "name", "normalized", "type", "chunk_count", "defined_count", "mention_table", "neighbor_table"]
    readonly_fields = fields

    @admin.display(description="Tenant")
    def tenant_slug(self, obj: Entity) -> str:
        return obj.tenant.slug

    @admin.display(description="Mentions (strongest first)")
    def mention_table(self, obj: Entity) -> str:
        rows = entity_mentions(entity=obj)
        if not rows:
            return "None."
        body = format_html_join(
            "", '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>',
            ((reverse("admin:knowledge_document_change", args=[row["document_id"]]), row["document__title"] or row["document__external_id"],
              row["chunk__chunk_id"], row["extractor"], round(row["weight"], 2)) for row in rows),
        )
        more = "" if obj.chunk_count <= len(rows) else format_html("<p>The first {} of {} chunks.</p>", len(rows), obj.chunk_count)
        return format_html(
            '<div class="quarry-table-scroll"><table class="quarry-graph"><thead><tr><th>Document</th><th>Chunk</th>'
            "<th>Found by</th><th>Weight</th></tr></thead><tbody>{}</tbody></table></div>{}", body, more,
        )

    @admin.display(description="Neighbours (through relations its chunks state)")
    def neighbor_table(self, obj: Entity) -> str:
        rows = entity_neighbors(entity=obj)
        if not rows:
            return "None."
        body = format_html_join(
            "", '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>',
            ((reverse("admin:knowledge_entity_change", args=[row["entity"].pk]), row["entity"].name,
              ", ".join(row["predicates"]), row["chunks"], row["weight"]) for row in rows),
        )
        return format_html(
            '<div class="quarry-table-scroll"><table class="quarry-graph"><thead><tr><th>Entity</th><th>Relations</th>'
            "<th>Chunks</th><th>Weight</th></tr></thead><tbody>{}</tbody></table></div>", body,
        )
