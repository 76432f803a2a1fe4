"""Admin for tenants, memberships, groups and API tokens (superusers and tenant admins)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import Group as PermissionGroup
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.models import ApiToken, Group, Membership, Role, Tenant
from accounts.selectors import membership_role, tenants_for_user
from accounts.services import api_token_create, api_token_revoke


# Django's permission groups play no part in Quarry (roles are memberships, who reads what is access
# lists): listed beside Quarry's own groups, they were a second "Groups" that changed nothing.
admin.site.unregister(PermissionGroup)


# Users are chosen by typing a name (Django's autocomplete over the user admin's search fields:
# username, names, email), never by their numeric id.


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    # Not ``private_to``: the chat makes a conversation's private store; choosing one here would hide this tenant.
    fields = ["slug", "name", "chunk_quota", "chunk_quota_name"]
    inlines = [MembershipInline]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        # Private stores (a conversation's files) are listed with their conversation, not as tenants.
        return super().get_queryset(request).public()


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role", "tenant"]
    list_select_related = ["user", "tenant"]
    autocomplete_fields = ["user"]
    search_fields = ["user__username", "tenant__slug"]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser


class GroupForm(forms.ModelForm):
    class Meta:
        model = Group
        fields = ["tenant", "name", "members"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        tenant, members = cleaned.get("tenant"), cleaned.get("members")
        if tenant is not None and members is not None:
            outside = [m.get_username() for m in members if not Membership.objects.filter(user=m, tenant=tenant).exists()]
            if outside:
                self.add_error("members", f"not members of tenant {tenant.slug}: {', '.join(sorted(outside))}")
        return cleaned


@admin.register(Group)
class GroupAdmin(admin.ModelAdmin):
    """A tenant's groups and their members (issue 34): superusers, and each tenant's admins for their tenant.
    Documents name groups in their access lists; a member's change counts from their next request."""

    form = GroupForm
    list_display = ["name", "tenant", "member_count", "created_at"]
    list_filter = ["tenant"]
    list_select_related = ["tenant"]
    search_fields = ["name", "members__username"]
    autocomplete_fields = ["members"]

    def _tenants(self, request: HttpRequest) -> list[Tenant]:
        user = request.user
        if not (user.is_active and user.is_staff):
            return []
        return tenants_for_user(user=user, min_role=Role.ADMIN)  # type: ignore[arg-type]

    def _allowed(self, request: HttpRequest, obj: Group | None = None) -> bool:
        tenants = {t.pk for t in self._tenants(request)}
        return bool(tenants) and (obj is None or obj.tenant_id in tenants)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Group]:
        return super().get_queryset(request).filter(tenant__in=self._tenants(request)).prefetch_related("members")

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = Tenant.objects.filter(pk__in=[t.pk for t in self._tenants(request)])
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="Members")
    def member_count(self, obj: Group) -> int:
        return len(obj.members.all())


class ApiTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["tenant", "owner", "role", "name"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        tenant, owner, role = data.get("tenant"), data.get("owner"), data.get("role")
        if tenant and owner and role:
            held = membership_role(user=owner, tenant=tenant)
            if held is None or Role.rank(held) < Role.rank(role):
                raise forms.ValidationError(
                    f"{owner} is not {Role.with_article(role)} of tenant {tenant}; a token cannot carry more rights than its owner."
                )
        return data


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ["prefix", "name", "tenant", "owner", "role", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["role", "tenant"]
    list_select_related = ["tenant", "owner"]
    autocomplete_fields = ["owner"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    fields = ["tenant", "owner", "role", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke_selected"]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return obj is None and super().has_change_permission(request)  # tokens are immutable; revoke instead

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        token, secret = api_token_create(tenant=obj.tenant, owner=obj.owner, role=obj.role, name=obj.name)
        obj.pk = token.pk
        obj.prefix, obj.digest = token.prefix, token.digest
        self.message_user(
            request, f"Token created. Copy it now, it will not be shown again: {secret}", level=messages.WARNING
        )

    @admin.action(description="Revoke selected tokens")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            api_token_revoke(token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).")
