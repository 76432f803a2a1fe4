"""The end users' web pages: sign-in, the chat page, the tenant switcher, search, documents.

Pages are thin: resolve the tenant, call one selector or service, render. The chat itself
streams over the WebSocket (``chat.consumers``); the page's JavaScript uses the small JSON
endpoints here for the session list (rename, delete) and ``/v1/chunks/fetch`` for sources.

Every page sends a strict Content-Security-Policy (no inline script or style, no plugins,
no framing): model output and document text are escaped where they are rendered, and the
policy is the second line of defence if an escape is ever missed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.utils.html import escape
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from accounts.access import TenantContext
from accounts.selectors import tenants_for_user
from chat.prompting import greeting
from chat.services import TITLE_MAX_CHARS, chat_session_delete, chat_session_rename
from chat.webchat import chat_session_for, chat_session_list, chat_session_summary, tenant_context_for_user
from knowledge import rag
from knowledge.rag import limits
from knowledge.selectors import chunk_search, document_chunks, document_get

# The tenant a user last switched to, kept in their session.
SESSION_TENANT_KEY = "quarry_tenant"
SEARCH_LIMIT = 10
SNIPPET_CHARS = 320
# A document page shows at most this many characters around the highlighted chunk, so a
# ten-million-character document does not become a ten-megabyte page.
DOCUMENT_WINDOW_CHARS = 100_000


# --- plumbing -------------------------------------------------------------------------------


def _content_security_policy(request: HttpRequest) -> str:
    host = request.get_host()  # validated against ALLOWED_HOSTS by now
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
        f"connect-src 'self' ws://{host} wss://{host}; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )


def page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A private HTML page: never cached, under the strict Content-Security-Policy."""

    uncached = never_cache(view)

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = uncached(request, *args, **kwargs)
        response.setdefault("Content-Security-Policy", _content_security_policy(request))
        response.setdefault("Referrer-Policy", "same-origin")
        return response

    return wrapper


def _wants_json(request: HttpRequest) -> bool:
    return request.headers.get("Accept", "").startswith("application/json")


def _json_error(status: int, code: str, detail: str) -> JsonResponse:
    response = JsonResponse({"error": code, "detail": detail}, status=status)
    response["Cache-Control"] = "no-store"
    return response


def signed_in(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Signed-in users only: others go to the login page (JSON callers get a 401)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            if _wants_json(request):
                return _json_error(401, "not_authenticated", "Sign in to continue.")
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        return view(request, *args, **kwargs)

    return wrapper


class NoTenant(Exception):
    """The user belongs to no tenant: there is nothing they may read."""


def page_tenant(request: HttpRequest) -> TenantContext:
    """The tenant a page works in.

    ``tenant`` in the query string or form wins (404 unless the user is a member: links
    carry it, so a page keeps its tenant when another tab switches). Otherwise the tenant
    the user last switched to, then ``DEFAULT`` (the API's default), then their first.
    """
    explicit = request.GET.get("tenant") or request.POST.get("tenant")
    if explicit:
        ctx = tenant_context_for_user(user=request.user, slug=explicit)
        if ctx is None:
            raise Http404("Tenant not found.")
        return ctx
    for slug in (request.session.get(SESSION_TENANT_KEY), None):
        ctx = tenant_context_for_user(user=request.user, slug=slug)
        if ctx is not None:
            return ctx
    for tenant in tenants_for_user(user=request.user):
        ctx = tenant_context_for_user(user=request.user, slug=tenant.slug)
        if ctx is not None:
            return ctx
    raise NoTenant


def _base_context(request: HttpRequest, ctx: TenantContext, **extra: Any) -> dict[str, Any]:
    return {"ctx": ctx, "tenant": ctx.tenant, "tenants": tenants_for_user(user=request.user), **extra}


def tenant_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``signed_in`` + ``page``, passing the resolved ``TenantContext``; a user with no tenant sees why."""

    @page
    @signed_in
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            ctx = page_tenant(request)
        except NoTenant:
            return render(request, "chat/no_tenant.html", status=403)
        return view(request, ctx, *args, **kwargs)

    return wrapper


# --- sign-in ----------------------------------------------------------------------------------

login = page(auth_views.LoginView.as_view(template_name="registration/login.html", redirect_authenticated_user=True))
logout = page(auth_views.LogoutView.as_view())


@page
@signed_in
@require_POST
def tenant_switch(request: HttpRequest) -> HttpResponse:
    """Remember the tenant the user picked (a member's only) and go back to the chat."""
    ctx = tenant_context_for_user(user=request.user, slug=request.POST.get("tenant") or "")
    if ctx is None:
        raise Http404("Tenant not found.")
    request.session[SESSION_TENANT_KEY] = ctx.tenant.slug
    target = request.POST.get("next") or "/"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        target = "/"
    return HttpResponseRedirect(target)


# --- the chat page and its sessions --------------------------------------------------------------


@tenant_page
@require_GET
def chat_page(request: HttpRequest, ctx: TenantContext) -> HttpResponse:
    return render(request, "chat/chat.html", _base_context(
        request, ctx, sessions=chat_session_list(ctx=ctx), greeting=greeting(tenant_name=ctx.tenant.name or ctx.tenant.slug),
        max_prompt_chars=limits.MAX_QUERY_CHARS, title_max_chars=TITLE_MAX_CHARS, nav="chat",
    ))


def _summary_json(summary: dict[str, Any]) -> dict[str, Any]:
    return {**summary, "updated_at": summary["updated_at"].isoformat()}


@page
@signed_in
@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    """``{"sessions": [...]}``: the caller's conversations in the page's tenant, newest first."""
    try:
        ctx = page_tenant(request)
    except NoTenant:
        return _json_error(404, "tenant_not_found", "Tenant not found.")
    response = JsonResponse({"sessions": [_summary_json(s) for s in chat_session_list(ctx=ctx)]})
    response["Cache-Control"] = "no-store"
    return response


def _owned_session(request: HttpRequest, session_id: str) -> tuple[TenantContext, Any]:
    try:
        ctx = page_tenant(request)
    except NoTenant:
        raise Http404("Not found.") from None
    session = chat_session_for(ctx=ctx, session_id=session_id)
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
            if _wants_json(request):
                return _json_error(404, "not_found", "Not found.")
            raise
        return view(request, ctx, session)

    return wrapper


@_session_action
def session_rename(request: HttpRequest, ctx: TenantContext, session: Any) -> HttpResponse:
    title = request.POST.get("title", "")
    if len(title) > TITLE_MAX_CHARS * 4:
        return _json_error(400, "invalid", f"A title has at most {TITLE_MAX_CHARS} characters.")
    session = chat_session_rename(session=session, title=title)
    if _wants_json(request):
        return JsonResponse({"session": _summary_json(chat_session_summary(session=session))})
    return HttpResponseRedirect(f"/?session={session.public_id}")


@_session_action
def session_delete(request: HttpRequest, ctx: TenantContext, session: Any) -> HttpResponse:
    chat_session_delete(session=session)
    if _wants_json(request):
        return JsonResponse({"deleted": session.public_id})
    return HttpResponseRedirect("/")


# --- documents ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DocumentExcerpt:
    before: str
    chunk: str
    after: str
    start: int  # offsets of the shown text within the document
    end: int
    total: int


def document_excerpt(text: str, start: int | None, end: int | None, window: int = DOCUMENT_WINDOW_CHARS) -> DocumentExcerpt:
    """The document's text split around the chunk ``[start, end)``, cut to ``window`` characters each side."""
    total = len(text)
    if start is None or end is None:
        shown_end = min(total, 2 * window)
        return DocumentExcerpt(text[:shown_end], "", "", 0, shown_end, total)
    start, end = max(0, min(start, total)), max(0, min(end, total))
    lo, hi = max(0, start - window), min(total, end + window)
    return DocumentExcerpt(text[lo:start], text[start:end], text[end:hi], lo, hi, total)


@tenant_page
@require_GET
def document_page(request: HttpRequest, ctx: TenantContext, document_id: str) -> HttpResponse:
    """A document of the tenant, the ``chunk`` of the query string highlighted; 404 for anything else."""
    document = document_get(tenant=ctx.tenant, external_id=document_id)
    if document is None:
        raise Http404("Document not found.")
    chunk = None
    chunk_id = request.GET.get("chunk")
    if chunk_id:
        chunk = (
            document_chunks(tenant=ctx.tenant, document=document).filter(chunk_id=chunk_id)
            .values("chunk_id", "ordinal", "start_char", "end_char").first()
        )
        if chunk is None:
            raise Http404("Passage not found.")
    excerpt = document_excerpt(document.text, chunk and chunk["start_char"], chunk and chunk["end_char"])
    uri = document.uri if re.match(r"^https?://", document.uri or "", re.IGNORECASE) else ""
    return render(request, "chat/document.html", _base_context(
        request, ctx, document=document, chunk=chunk, excerpt=excerpt, link=uri, nav="document",
    ))


# --- search -----------------------------------------------------------------------------------------------

_TERM = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i in is it its of on or that the this to was what when "
    "where which who why will with you your".split()
)


def query_terms(query: str) -> list[str]:
    """Words of ``query`` worth highlighting, lightly stemmed (``uploads`` -> ``upload``), longest first.

    Words excluded with websearch syntax (``-draft``) are not highlighted: they never match.
    """
    kept = " ".join(w for w in query.split() if not w.startswith("-"))
    stems: set[str] = set()
    for word in (w.lower() for w in _TERM.findall(kept)):
        if word in _STOPWORDS or len(word) < 2:
            continue
        # (suffix, characters to cut): "watching" -> "watch", "boxes" -> "box", "files" -> "file".
        for suffix, cut in (("ing", 3), ("ed", 2), ("ches", 2), ("shes", 2), ("sses", 2), ("xes", 2), ("s", 1)):
            if word.endswith(suffix) and len(word) - cut >= 3:
                word = word[:-cut]
                break
        stems.add(word)
    return sorted(stems, key=lambda s: (-len(s), s))


def _terms_pattern(terms: list[str]) -> re.Pattern[str] | None:
    if not terms:
        return None
    return re.compile(r"\b(?:" + "|".join(re.escape(t) for t in terms) + r")\w*", re.IGNORECASE | re.UNICODE)


def highlight(text: str, pattern: re.Pattern[str] | None) -> SafeString:
    """``text`` escaped, with the matches of ``pattern`` in ``<mark>``: every piece is escaped on its own."""
    if pattern is None:
        return escape(text)
    parts: list[str] = []
    position = 0
    for match in pattern.finditer(text):
        parts.append(escape(text[position:match.start()]))
        parts.append(f"<mark>{escape(match.group(0))}</mark>")
        position = match.end()
    parts.append(escape(text[position:]))
    return mark_safe("".join(parts))  # noqa: S308 - built from escaped pieces only


def snippet(text: str, pattern: re.Pattern[str] | None, size: int = SNIPPET_CHARS) -> SafeString:
    """About ``size`` characters of ``text`` around its first match, cut at spaces, highlighted."""
    text = " ".join(text.split())
    match = pattern.search(text) if pattern is not None else None
    start = 0 if match is None else max(0, match.start() - size // 3)
    if start:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + 30 else start
    end = min(len(text), start + size)
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > start + size // 2 else end
    body = highlight(text[start:end], pattern)
    return mark_safe(("… " if start else "") + body + (" …" if end < len(text) else ""))  # noqa: S308


class FilterSyntaxError(ValueError):
    pass


def parse_filters(raw: str) -> dict[str, object]:
    """``field = value`` per line (or separated by ``;``); a field given twice matches either value.

    Metadata keeps JSON types, so a value that reads as a number or a boolean matches both
    the text and the typed value (``year = 2024`` finds ``"2024"`` and ``2024``).
    """
    values: dict[str, list[object]] = {}
    for item in re.split(r"[;\n]", raw):
        item = item.strip()
        if not item:
            continue
        field, sep, value = item.partition("=")
        field, value = field.strip(), value.strip()
        if not sep or not field or not value:
            raise FilterSyntaxError(f"“{item}” is not a filter: write field = value.")
        candidates: list[object] = [value]
        if value.lower() in ("true", "false"):
            candidates.append(value.lower() == "true")
        else:
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if math.isfinite(number):
                candidates.append(int(number) if number.is_integer() and re.fullmatch(r"[+-]?\d+", value) else number)
        bucket = values.setdefault(field, [])
        for candidate in candidates:  # 1 == True in Python, but not in JSON: compare types too
            if not any(type(kept) is type(candidate) and kept == candidate for kept in bucket):
                bucket.append(candidate)
    return {field: vals[0] if len(vals) == 1 else tuple(vals) for field, vals in values.items()}


@dataclass(frozen=True)
class SearchHitView:
    rank: int
    chunk_id: str
    document_id: str
    title: str
    snippet: SafeString
    score: float
    rrf_rank: int | None
    semantic_similarity: float | None


@tenant_page
@require_GET
def search_page(request: HttpRequest, ctx: TenantContext) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    mode = request.GET.get("mode") or rag.SearchMode.HYBRID.value
    if mode not in {m.value for m in rag.SearchMode}:
        mode = rag.SearchMode.HYBRID.value
    raw_filters = request.GET.get("filters", "")
    hits: list[SearchHitView] = []
    error = ""
    if query:
        try:
            filters = parse_filters(raw_filters)
            found = chunk_search(tenant=ctx.tenant, query=query, mode=mode, limit=SEARCH_LIMIT, filters=filters)
        except FilterSyntaxError as exc:
            error = str(exc)
        except (rag.RAGValidationError, rag.RAGTypeError) as exc:
            error = f"{exc.field}: {exc.message}"
        except rag.ConfigurationError:
            error = "This search mode is not available here: no embedding model is configured. Try keyword search."
        except rag.EmbedderError:
            error = "The embedding model failed, so semantic search is unavailable right now. Try keyword search."
        else:
            pattern = _terms_pattern(query_terms(query))
            hits = [
                SearchHitView(
                    rank=n, chunk_id=h.chunk.chunk_id, document_id=h.chunk.document_id,
                    title=h.chunk.title or h.chunk.document_id, snippet=snippet(h.chunk.text, pattern), score=h.score,
                    rrf_rank=h.rrf_rank, semantic_similarity=h.semantic_similarity,
                )
                for n, h in enumerate(found, start=1)
            ]
    return render(request, "chat/search.html", _base_context(
        request, ctx, query=query, mode=mode, modes=[m.value for m in rag.SearchMode], filters=raw_filters,
        hits=hits, error=error, searched=bool(query), nav="search", max_query_chars=limits.MAX_QUERY_CHARS,
    ), status=400 if error else 200)
