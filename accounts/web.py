"""What every HTML page of the product shares: the Content-Security-Policy, the sign-in and tenant decorators,
and the admin's tenant scoping (``TenantScopedAdmin``, ``TenantFilter``, ``ReadOnlyAdmin``, ``tenant_choices``).

Every page sends a strict Content-Security-Policy (no inline script or style, no plugins,
no framing): model output and document text are escaped where they are rendered, and the
policy is the second line of defence if an escape is ever missed. The product's pages set it
themselves (``page``); ``ContentSecurityPolicyMiddleware`` gives every other response one too:
the admin and the API docs get the pages' policy (their scripts and styles are static files),
and everything else (the JSON API) a policy that allows nothing at all.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.deprecation import MiddlewareMixin
from django.utils.html import format_html
from django.views.decorators.cache import never_cache

from accounts.access import NoTenant, TenantContext, admin_tenants, editable_tenants, page_tenant
from accounts.models import Role, Tenant
from accounts.selectors import tenants_for_user


def content_security_policy(request: HttpRequest) -> str:
    """The pages' policy: everything from this origin only, WebSockets to this host, nothing inline.

    A request for a host we do not serve gets the policy without WebSockets (its 400 page needs none).
    """
    try:
        host: str | None = request.get_host()
    except DisallowedHost:
        host = None
    sockets = f" ws://{host} wss://{host}" if host else ""
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
        f"connect-src 'self'{sockets}; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )


def content_security_policy_for_redoc(request: HttpRequest) -> str:
    """The pages' policy with what Redoc needs, for /v1/redoc only.

    Redoc renders through styled-components, which writes <style> elements at run time, and
    runs its search index in a worker it builds from its own bundle as a blob: URL. Scripts
    stay 'self' only: no inline or injected script can run.
    """
    return content_security_policy(request).replace(
        "style-src 'self'", "style-src 'self' 'unsafe-inline'; worker-src 'self' blob:", 1)


# For responses that are not pages (JSON, scripts): nothing may be loaded, framed or submitted.
API_CONTENT_SECURITY_POLICY = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """A Content-Security-Policy on every response that has none (the admin, /v1/docs, the API)."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if "Content-Security-Policy" not in response:
            html = response.get("Content-Type", "").startswith("text/html")
            response["Content-Security-Policy"] = content_security_policy(request) if html else API_CONTENT_SECURITY_POLICY
        response.setdefault("Referrer-Policy", "same-origin")
        return response


def page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A private HTML page: never cached, under the strict Content-Security-Policy."""

    uncached = never_cache(view)

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = uncached(request, *args, **kwargs)
        response.setdefault("Content-Security-Policy", content_security_policy(request))
        response.setdefault("Referrer-Policy", "same-origin")
        return response

    return wrapper


def wants_json(request: HttpRequest) -> bool:
    return request.headers.get("Accept", "").startswith("application/json")


def json_error(status: int, code: str, detail: str) -> JsonResponse:
    """The project's error shape for the pages' small JSON endpoints."""
    response = JsonResponse({"error": code, "detail": detail}, status=status)
    response["Cache-Control"] = "no-store"
    return response


def signed_in(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Signed-in users only: others go to the login page (JSON callers get a 401)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            if wants_json(request):
                return json_error(401, "not_authenticated", "Sign in to continue.")
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        return view(request, *args, **kwargs)

    return wrapper


def base_context(request: HttpRequest, ctx: TenantContext, **extra: Any) -> dict[str, Any]:
    """What ``base.html`` needs: the tenant, the tenants to switch to, and the page's own values."""
    return {"ctx": ctx, "tenant": ctx.tenant, "tenants": tenants_for_user(user=request.user), **extra}  # type: ignore[arg-type]


def tenant_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``signed_in`` + ``page``, passing the resolved ``TenantContext``; a user with no tenant sees why."""

    @page
    @signed_in
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            ctx = page_tenant(request)
        except NoTenant:
            return render(request, "accounts/no_tenant.html", status=403)
        return view(request, ctx, *args, **kwargs)

    return wrapper


# --- The admin's tenancy: every app's tenant-scoped admin pages share these ----------------------------


class ReadOnlyAdmin:
    """For records only the system writes (audit events, entities, index rebuilds): viewed, never edited here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TenantScopedAdmin(admin.ModelAdmin):
    """Rows carry ``tenant``; a non-superuser sees and touches only editable tenants' rows.

    Access follows tenant roles (editor or admin), not Django's per-model permissions:
    the role is the one permission system of the product. ``min_role``: the least role a
    tenant's staff need here; ``Role.ADMIN`` for pages that would show what documents say
    without the per-document access test (issue 34: entities, feedback, the audit log), which
    only tenant admins, who read everything, may see.
    """

    min_role: Role = Role.EDITOR

    def _scope(self, request: HttpRequest) -> list[Tenant]:
        """The tenants whose rows this admin shows ``request.user`` (not for superusers)."""
        if self.min_role == Role.EDITOR:
            return list(editable_tenants(request))
        return admin_tenants(request)  # read with editable_tenants' one statement, once per request

    def _allowed(self, request: HttpRequest, obj: Any = None) -> bool:
        user = request.user
        if not (user.is_active and user.is_staff):
            return False
        if obj is not None and getattr(obj, "tenant_id", None) is not None and _is_private(obj.tenant_id):
            return False  # a conversation's files: ConversationFileAdmin lists them, without their text
        if user.is_superuser:
            return True
        tenant_ids = {t.pk for t in self._scope(request)}
        return bool(tenant_ids) and (obj is None or obj.tenant_id in tenant_ids)

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

    def tenant_choices(self, request: HttpRequest) -> QuerySet[Tenant]:
        """The tenants this admin's forms may name: those in its scope (every tenant but the private stores
        for a superuser)."""
        if request.user.is_superuser:
            return Tenant.objects.public()
        return Tenant.objects.filter(pk__in=[t.pk for t in self._scope(request)])

    def get_list_display(self, request: HttpRequest) -> Any:
        # One tenant's name on every row is width the other columns need (a change list must fit 1280 px).
        columns = super().get_list_display(request)
        if "tenant" in columns and len(self._scope(request)) < 2:
            return [column for column in columns if column != "tenant"]
        return columns

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            # Every tenant but the private stores: a conversation's files are its owner's alone.
            return queryset.filter(tenant__private_to__isnull=True)
        return queryset.filter(tenant__in=self._scope(request))


def admin_time_texts(value: datetime) -> dict[str, str]:
    """A time as the admin's lists show it: ``short`` ("2026-12-05 19:13"), ``full`` (the tooltip), ``iso``."""
    local = timezone.localtime(value)
    return {"short": local.strftime("%Y-%m-%d %H:%M"), "full": local.strftime("%A %d %B %Y, %H:%M:%S %Z"),
            "iso": local.isoformat()}


def admin_time(value: datetime | None, *, live: int | None = None) -> str:
    """A change list's time: short and on one line, the full one in its tooltip (``admin_time_texts``).
    ``live``: the row's id, for a list whose script keeps the time current (``data-quarry-time``)."""
    if value is None:
        return "—"
    texts = admin_time_texts(value)
    return format_html('<time class="quarry-time" datetime="{}" title="{}"{}>{}</time>', texts["iso"], texts["full"],
                       format_html(' data-quarry-time="{}"', live) if live is not None else "", texts["short"])


def admin_excerpt(text: str, limit: int) -> str:
    """A long text in a change list: its first ``limit`` characters, all of it (up to 1,000) in the tooltip."""
    if len(text) <= limit:
        return text
    return format_html('<span title="{}">{}…</span>', text[:1000], text[: limit - 1])


def tenant_choices(request: HttpRequest) -> QuerySet[Tenant]:
    """The tenants a form may name: the editable ones (every tenant for a superuser), never a private store."""
    if request.user.is_superuser:
        return Tenant.objects.public()
    return Tenant.objects.filter(pk__in=[t.pk for t in editable_tenants(request)])


def _is_private(tenant_id: int) -> bool:
    return Tenant.objects.filter(pk=tenant_id, private_to__isnull=False).exists()


class TenantFilter(admin.SimpleListFilter):
    """Filter by tenant, listing only the tenants the user may see."""

    title = "tenant"
    parameter_name = "tenant"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(t.pk), t.slug) for t in editable_tenants(request)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(tenant_id=self.value()) if self.value() else queryset
