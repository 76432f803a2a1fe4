"""The web chat's pages: the chat itself and the small JSON endpoints its script uses for the
session list (rename, delete). The answers stream over the WebSocket (``chat.consumers``).

Thin: resolve the tenant (``accounts.web``), call one selector or service, render.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from accounts.access import NoTenant, TenantContext, page_tenant
from accounts.web import base_context, json_error, page, signed_in, tenant_page, wants_json
from chat.prompting import greeting
from chat.selectors import SEARCH_MAX_CHARS, chat_session_find, chat_session_list, chat_session_summary
from chat.services import TITLE_MAX_CHARS, chat_session_delete, chat_session_rename
from knowledge.rag import limits


@tenant_page
@require_GET
def chat_page(request: HttpRequest, ctx: TenantContext) -> HttpResponse:
    return render(request, "chat/chat.html", base_context(
        request, ctx, sessions=chat_session_list(tenant=ctx.tenant, principal=ctx.principal), greeting=greeting(tenant_name=ctx.tenant.name or ctx.tenant.slug),
        max_prompt_chars=limits.MAX_QUERY_CHARS, title_max_chars=TITLE_MAX_CHARS, nav="chat",
    ))


def _summary_json(summary: dict[str, Any]) -> dict[str, Any]:
    return {**summary, "updated_at": summary["updated_at"].isoformat()}


@page
@signed_in
@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    """``{"sessions": [...]}``: the caller's conversations in the page's tenant, newest first; with
    ``?q=``, those whose title or messages contain it (the sidebar's search)."""
    try:
        ctx = page_tenant(request)
    except NoTenant:
        return json_error(404, "tenant_not_found", "Tenant not found.")
    query = request.GET.get("q", "")
    if len(query) > SEARCH_MAX_CHARS:
        return json_error(400, "invalid", f"q: a search has at most {SEARCH_MAX_CHARS} characters.")
    found = chat_session_list(tenant=ctx.tenant, principal=ctx.principal, query=query)
    response = JsonResponse({"sessions": [_summary_json(s) for s in found], "query": query})
    response["Cache-Control"] = "no-store"
    return response


def _owned_session(request: HttpRequest, session_id: str) -> tuple[TenantContext, Any]:
    try:
        ctx = page_tenant(request)
    except NoTenant:
        raise Http404("Not found.") from None
    session = chat_session_find(tenant=ctx.tenant, principal=ctx.principal, session_id=session_id)
    if session is None:
        raise Http404("Not found.")
    return ctx, session


def _session_action(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """POST on one of the caller's sessions: JSON for the page's script, a redirect for a plain form."""

    @page
    @signed_in
    @require_POST
    @wraps(view)
    def wrapper(request: HttpRequest, session_id: str) -> HttpResponse:
        try:
            ctx, session = _owned_session(request, session_id)
        except Http404:
            if wants_json(request):
                return json_error(404, "not_found", "Not found.")
            raise
        return view(request, ctx, session)

    return wrapper


@_session_action
def session_rename(request: HttpRequest, ctx: TenantContext, session: Any) -> HttpResponse:
    title = request.POST.get("title", "")
    if len(title) > TITLE_MAX_CHARS * 4:
        return json_error(400, "invalid", f"A title has at most {TITLE_MAX_CHARS} characters.")
    session = chat_session_rename(session=session, title=title)
    if wants_json(request):
        return JsonResponse({"session": _summary_json(chat_session_summary(session=session))})
    return HttpResponseRedirect(f"/?session={session.public_id}")


@_session_action
def session_delete(request: HttpRequest, ctx: TenantContext, session: Any) -> HttpResponse:
    chat_session_delete(session=session)
    if wants_json(request):
        return JsonResponse({"deleted": session.public_id})
    return HttpResponseRedirect("/")
