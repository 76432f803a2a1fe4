"""Sign-in, sign-out and the tenant switcher (the pages every app's pages link to)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.access import SESSION_TENANT_KEY, tenant_context_for_user
from accounts.web import page, signed_in

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
