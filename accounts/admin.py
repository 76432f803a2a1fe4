"""Admin for tenants, memberships, groups and API tokens (superusers and tenant admins)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import Group as PermissionGroup
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.models import ApiToken, Group, Membership, Role, Tenant
from accounts.selectors import membership_role
from accounts.services import api_token_create, api_token_revoke, tenant_access_changed
from accounts.web import TenantFilter, TenantScopedAdmin


# Django's permission groups play no part in Quarry (roles are memberships, who reads what is access
# lists): listed beside Quarry's own groups, they were a second "Groups" that changed nothing.
admin.site.unregister(PermissionGroup)


# Users are chosen by typing a name (Django's autocomplete over the user admin's search fields:
# username, names, email), never by their numeric id.


class _ChangesAccess:
    """An admin whose saves and deletions change who may read what in a tenant (memberships, groups and
    their members): written by Django's forms, not the services, so the admin tells the tenant itself
    (``tenant_access_changed``: read replicas must not serve the old state)."""

    def _changed_tenants(self, obj: Any) -> list[Tenant]:
        return [obj.tenant]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)  # type: ignore[misc]  # the members (m2m) and inlines
        tenants = self._changed_tenants(form.instance)
        if "tenant" in getattr(form, "changed_data", ()) and form.initial.get("tenant"):
            tenants += list(Tenant.objects.filter(pk=form.initial["tenant"]))  # moved: the old tenant changes too
        for tenant in tenants:
            tenant_access_changed(tenant=tenant)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        tenants = self._changed_tenants(obj)
        super().delete_model(request, obj)  # type: ignore[misc]
        for tenant in tenants:
            tenant_access_changed(tenant=tenant)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        tenants = {t.pk: t for obj in queryset.select_related() for t in self._changed_tenants(obj)}
        super().delete_queryset(request, queryset)  # type: ignore[misc]
        for tenant in tenants.values():
            tenant_access_changed(tenant=tenant)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(_ChangesAccess, admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    # Not ``private_to``: the chat makes a conversation's private store; choosing one here would hide this tenant.
    fields = ["slug", "name", "chunk_quota", "chunk_quota_name"]
    inlines = [MembershipInline]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def _changed_tenants(self, obj: Tenant) -> list[Tenant]:
        return [obj]  # its memberships are inlines

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        # Private stores (a conversation's files) are listed with their conversation, not as tenants.
        return super().get_queryset(request).public()


@admin.register(Membership)
class MembershipAdmin(_ChangesAccess, admin.ModelAdmin):
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
class GroupAdmin(_ChangesAccess, TenantScopedAdmin):
    """A tenant's groups and their members (issue 34): superusers, and each tenant's admins for their tenant
    (editors never: a group decides who reads what). Documents name groups in their access lists; a
    member's change counts from their next request."""

    min_role = Role.ADMIN
    form = GroupForm
    list_display = ["name", "tenant", "member_count", "created_at"]
    list_filter = [TenantFilter]
    list_select_related = ["tenant"]
    search_fields = ["name", "members__username"]
    autocomplete_fields = ["members"]
    show_full_result_count = False  # the filtered count is the one shown; a second COUNT says nothing more

    def get_queryset(self, request: HttpRequest) -> QuerySet[Group]:
        return super().get_queryset(request).prefetch_related("members")

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = self.tenant_choices(request)
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
