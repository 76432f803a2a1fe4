"""Sign-in, sign-out and the tenant switcher (the pages every app's pages link to)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.access import SESSION_TENANT_KEY, tenant_context_for_user
from accounts.web import json_error, page, signed_in, wants_json

login = page(auth_views.LoginView.as_view(template_name="registration/login.html", redirect_authenticated_user=True))
logout = page(auth_views.LogoutView.as_view())


@page
@signed_in
@require_POST
def tenant_switch(request: HttpRequest) -> HttpResponse:
    """Remember the tenant the user picked (a member's only) and go back to where they were."""
    ctx = tenant_context_for_user(user=request.user, slug=request.POST.get("tenant") or "")
    if ctx is None:
        raise Http404("Tenant not found.")
    request.session[SESSION_TENANT_KEY] = ctx.tenant.slug
    target = request.POST.get("next") or "/"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        target = "/"
    return HttpResponseRedirect(target)


def login_locked_out(request: HttpRequest, response: HttpResponse | None, credentials: dict[str, Any] | None) -> HttpResponse:
    """django-axes' lockout answer (``AXES_LOCKOUT_CALLABLE``), for /login/ and /admin/login/ alike:
    429 with ``Retry-After``, a page saying for how long (JSON for JSON callers)."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    detail = (f"Too many failed sign-in attempts for this account or from this address. "
              f"Sign-in is locked for {minutes} minute{'s' if minutes != 1 else ''}; an administrator can unlock it sooner.")
    if wants_json(request):
        locked = json_error(429, "login_locked", detail)
    else:
        locked = render(request, "registration/locked_out.html", {"detail": detail, "minutes": minutes}, status=429)
    locked["Retry-After"] = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    add_never_cache_headers(locked)
    return locked  # its Content-Security-Policy comes from ContentSecurityPolicyMiddleware
