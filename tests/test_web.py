"""The end users' pages (accounts, knowledge and chat views) in process: sign-in, the chat page, the tenant switcher,
sessions (rename, delete), documents and search. Streaming is in test_consumer.py; the
real browser in tests/e2e/."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import Role
from chat.models import ChatSession, SessionKind, Turn
from chat.services import chat_exchange_record, chat_session_create
from knowledge import rag
from knowledge.forms import parse_filters
from knowledge.highlight import document_excerpt, highlight, query_terms, snippet, terms_pattern
from tests.conftest import World
from tests.factories import make_member, make_user

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-only"
XSS_TEXT = 'Safety notes: <script>alert("doc")</script> and <img src=x onerror="alert(1)"> are shown as text.'


def signed_in(user: User, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def index(tenant_slug: str, documents: list[rag.RAGDocument]) -> None:
    async_to_sync(rag.postgres(rag.default_embedder(), namespace=tenant_slug).ingest)(documents)


@pytest.fixture
def corpus(world: World) -> World:
    index("acme", [
        rag.RAGDocument("guide", "Editors upload files in the admin. Uploads are processed in the background by workers.",
                        title="Uploading", metadata={"team": "support", "year": 2024}),
        rag.RAGDocument("notes/xss", XSS_TEXT, title='<img src=x onerror="alert(2)">', metadata={"team": "security"}),
    ])
    index("globex", [rag.RAGDocument("guide", "Globex confidential: quarterly upload numbers for the board.", title="Board")])
    return world


def session_with_exchange(world: World, user: User, prompt: str, **kwargs: Any) -> ChatSession:
    session = chat_session_create(tenant=world.acme, principal=f"user:{user.pk}", **kwargs)
    chat_exchange_record(session=session, prompt=prompt, answer="An answer [1].",
                         citations=[{"document_id": "guide", "chunk_id": "guide:0", "score": 0.5}],
                         usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}, model="quarry/offline-extractive")
    return session


# --- sign-in -----------------------------------------------------------------------------------


def test_anonymous_visitor_is_sent_to_the_login_page(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/login/?next=/"
    for path in ("/search/", "/documents/guide"):
        assert client.get(path).status_code == 302
    assert client.get("/chat/sessions", HTTP_ACCEPT="application/json").json()["error"] == "not_authenticated"


def test_login_then_logout(world: World) -> None:
    client = Client(enforce_csrf_checks=True)
    page = client.get("/login/")
    assert page.status_code == 200
    assert b'<label for="id_username">Username</label>' in page.content
    assert "script-src 'self'" in page["Content-Security-Policy"]
    token = page.cookies["csrftoken"].value

    wrong = client.post("/login/", {"username": "teammate", "password": "nope", "csrfmiddlewaretoken": token})
    assert wrong.status_code == 200 and b'role="alert"' in wrong.content

    ok = client.post("/login/", {"username": "teammate", "password": PASSWORD, "next": "/", "csrfmiddlewaretoken": token})
    assert ok.status_code == 302 and ok["Location"] == "/"
    chat = client.get("/")
    assert chat.status_code == 200 and b"Ask me about the documents in acme" in chat.content

    out = client.post("/logout/", {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert out.status_code == 302 and out["Location"] == "/login/"
    assert client.get("/").status_code == 302


# --- the chat page --------------------------------------------------------------------------------


def test_chat_page_lists_only_the_callers_sessions_newest_first(world: World) -> None:
    older = session_with_exchange(world, world.teammate, "How do editors   upload files?")
    newer = session_with_exchange(world, world.teammate, "Second question", kind=SessionKind.AGENT)
    untitled = chat_session_create(tenant=world.acme, principal=f"user:{world.teammate.pk}")
    ChatSession.objects.filter(pk=untitled.pk).update(updated_at=older.updated_at.replace(year=2000))
    session_with_exchange(world, world.owner, "The owner's private question")

    response = signed_in(world.teammate).get("/")
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0") and "no-store" in response["Cache-Control"]
    csp = response["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "'unsafe-inline'" not in csp and "connect-src 'self' ws://testserver" in csp
    ids = re.findall(r'data-session-id="(session-[^"]+)"', response.content.decode())
    assert ids == [newer.public_id, older.public_id, untitled.public_id]
    html = response.content.decode()
    assert "How do editors upload files?" in html and "New conversation" in html
    assert "The owner&#x27;s private question" not in html and "owner's private" not in html
    assert 'data-tenant="acme"' in html


def test_a_user_without_a_workspace_is_told_so(db: None) -> None:
    response = signed_in(make_user("loner")).get("/")
    assert response.status_code == 403 and b"No workspace yet" in response.content


def test_tenant_switcher_remembers_a_tenant_of_the_user_and_404s_any_other(world: World) -> None:
    make_member(world.globex, Role.READER, "teammate")  # now in both tenants
    client = signed_in(world.teammate)
    assert b'id="tenant-select"' in client.get("/").content

    response = client.post("/tenant/", {"tenant": "globex", "next": "https://evil.example/"})
    assert response.status_code == 302 and response["Location"] == "/"  # no open redirect
    assert b'data-tenant="globex"' in client.get("/").content
    assert b'data-tenant="acme"' in client.get("/?tenant=acme").content  # a link may name its tenant

    stranger = signed_in(world.outsider)
    assert stranger.post("/tenant/", {"tenant": "acme"}).status_code == 404
    assert stranger.get("/?tenant=acme").status_code == 404
    assert stranger.post("/tenant/", {"tenant": "no-such-tenant"}).status_code == 404


def test_rename_and_delete_a_session_and_nobody_else_can(world: World) -> None:
    session = session_with_exchange(world, world.teammate, "Original question")
    url = f"/chat/sessions/{session.public_id}"
    json_headers = {"HTTP_ACCEPT": "application/json"}

    for intruder, tenant in ((world.owner, "acme"), (world.outsider, "globex"), (world.outsider, "acme")):
        client = signed_in(intruder)
        rename = client.post(f"{url}/rename", {"title": "Mine now", "tenant": tenant}, **json_headers)
        assert rename.status_code == 404 and rename.json() == {"error": "not_found", "detail": "Not found."}
        assert client.post(f"{url}/delete", {"tenant": tenant}, **json_headers).status_code == 404
    session.refresh_from_db()
    assert session.title == ""

    client = signed_in(world.teammate)
    renamed = client.post(f"{url}/rename", {"title": "  Uploads\n  and   workers ", "tenant": "acme"}, **json_headers)
    assert renamed.status_code == 200 and renamed.json()["session"]["title"] == "Uploads and workers"
    session.refresh_from_db()
    assert session.title == "Uploads and workers"
    cleared = client.post(f"{url}/rename", {"title": " ", "tenant": "acme"}, **json_headers)
    assert cleared.json()["session"]["title"] == "Original question"  # back to the derived title

    assert client.post(f"{url}/rename", {"title": "x" * 5000}, **json_headers).status_code == 400
    form = client.post(f"{url}/rename", {"title": "From a form"})  # no script: a plain redirect
    assert form.status_code == 302 and form["Location"] == f"/?session={session.public_id}"

    deleted = client.post(f"{url}/delete", {"tenant": "acme"}, **json_headers)
    assert deleted.status_code == 200 and deleted.json() == {"deleted": session.public_id}
    assert not ChatSession.objects.filter(pk=session.pk).exists() and not Turn.objects.filter(session_id=session.pk).exists()
    assert client.post(f"{url}/delete", {"tenant": "acme"}, **json_headers).status_code == 404


def test_session_actions_need_the_csrf_token(world: World) -> None:
    session = session_with_exchange(world, world.teammate, "Question")
    client = signed_in(world.teammate, enforce_csrf_checks=True)
    assert client.post(f"/chat/sessions/{session.public_id}/delete", HTTP_ACCEPT="application/json").status_code == 403
    assert ChatSession.objects.filter(pk=session.pk).exists()


def test_session_list_endpoint(world: World) -> None:
    session = session_with_exchange(world, world.teammate, "Listed question")
    body = signed_in(world.teammate).get("/chat/sessions?tenant=acme", HTTP_ACCEPT="application/json").json()
    assert [(s["session_id"], s["title"], s["kind"]) for s in body["sessions"]] == [(session.public_id, "Listed question", "chat")]
    assert signed_in(world.outsider).get("/chat/sessions?tenant=acme").status_code == 404


# --- documents ----------------------------------------------------------------------------------------


def test_document_page_highlights_the_cited_passage_and_escapes_everything(corpus: World) -> None:
    client = signed_in(corpus.teammate)
    response = client.get("/documents/notes/xss", {"chunk": "notes/xss:0", "tenant": "acme"})
    assert response.status_code == 200
    html = response.content.decode()
    assert '<mark id="passage" class="passage" tabindex="-1" aria-label="Cited passage">Safety notes: &lt;script&gt;' in html
    assert "<script>alert" not in html and "<img src=x" not in html and 'onerror="alert' not in html
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;</h1>" in html

    plain = client.get("/documents/guide")  # no chunk: the whole document, nothing highlighted
    assert plain.status_code == 200 and b"Editors upload files in the admin." in plain.content and b"<mark" not in plain.content


class Abstracts:
    """A custom chunker whose passages are not slices of the document (the seed allows any non-empty strings)."""

    def split(self, document: rag.RAGDocument) -> list[str]:
        return [f"Abstract: {document.text.split('.')[0].lower()} <b>(derived)</b>", document.text]


def test_document_page_shows_a_derived_passage_apart_and_marks_no_position(corpus: World) -> None:
    async_to_sync(rag.postgres(embedder=None, chunker=Abstracts(), namespace="acme").ingest)(
        [rag.RAGDocument("memo", "Otters hold hands while sleeping. They float on their backs.", title="Memo")]
    )
    client = signed_in(corpus.teammate)
    html = client.get("/documents/memo", {"chunk": "memo:0"}).content.decode()
    figure = re.search(r'<figure id="passage" class="passage passage-apart"[^>]*>(.*?)</figure>', html, re.S)
    assert figure is not None and "not marked" in figure.group(1)
    assert "Abstract: otters hold hands while sleeping &lt;b&gt;(derived)&lt;/b&gt;" in figure.group(1)
    body = html[html.index('<div class="document-text">'):]
    assert body.startswith('<div class="document-text">Otters hold hands while sleeping. They float on their backs.</div>')
    assert "<mark" not in html, "no position is highlighted"
    # The document's own text as a chunk still has its place marked.
    verbatim = client.get("/documents/memo", {"chunk": "memo:1"}).content.decode()
    assert '<mark id="passage" class="passage" tabindex="-1" aria-label="Cited passage">Otters hold hands' in verbatim
    assert "passage-apart" not in verbatim


def test_documents_of_another_tenant_or_unknown_passages_are_404(corpus: World) -> None:
    teammate = signed_in(corpus.teammate)
    assert teammate.get("/documents/missing").status_code == 404
    assert teammate.get("/documents/guide", {"chunk": "notes/xss:0"}).status_code == 404  # another document's chunk
    assert teammate.get("/documents/guide", {"chunk": "guide:99"}).status_code == 404
    assert teammate.get("/documents/guide", {"tenant": "globex"}).status_code == 404

    outsider = signed_in(corpus.outsider)
    assert outsider.get("/documents/notes/xss", {"tenant": "acme"}).status_code == 404
    own = outsider.get("/documents/guide", {"chunk": "guide:0"})  # same id in their own tenant: their text only
    assert own.status_code == 200 and b"Globex confidential" in own.content and b"Editors upload" not in own.content


def test_document_excerpt_keeps_long_documents_bounded() -> None:
    text = "a" * 1000 + "CHUNK" + "b" * 1000
    excerpt = document_excerpt(text, 1000, 1005, window=100)
    assert (excerpt.before, excerpt.chunk, excerpt.after) == ("a" * 100, "CHUNK", "b" * 100)
    assert (excerpt.start, excerpt.end, excerpt.total) == (900, 1105, 2005)
    whole = document_excerpt("short", None, None)
    assert (whole.before, whole.chunk, whole.start, whole.end) == ("short", "", 0, 5)


# --- search ----------------------------------------------------------------------------------------------


def test_search_page_ranks_hits_with_escaped_highlighted_snippets(corpus: World) -> None:
    client = signed_in(corpus.teammate)
    empty = client.get("/search/")
    assert empty.status_code == 200 and b'role="search"' in empty.content and b'<ol class="hits">' not in empty.content

    response = client.get("/search/", {"q": "uploads", "mode": "keyword"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Editors <mark>upload</mark> files in the admin. <mark>Uploads</mark> are processed" in html
    assert 'href="/documents/guide?tenant=acme&amp;chunk=guide%3A0#passage"' in html
    assert "Globex" not in html  # another tenant's passage never shows

    xss = client.get("/search/", {"q": "safety notes", "mode": "keyword"}).content.decode()
    assert "<mark>Safety</mark> <mark>notes</mark>: &lt;script&gt;alert(&quot;doc&quot;)&lt;/script&gt;" in xss
    assert "<script>alert" not in xss and "<img src=x" not in xss


def test_search_filters_and_their_errors(corpus: World) -> None:
    client = signed_in(corpus.teammate)
    filtered = client.get("/search/", {"q": "upload files notes", "mode": "keyword", "filters": "team = support\nyear = 2024"})
    assert filtered.status_code == 200
    assert re.findall(r'chunk=([^#"]+)#passage', filtered.content.decode()) == ["guide%3A0"]
    either = client.get("/search/", {"q": "upload files notes", "mode": "keyword", "filters": "team = support; team = security"})
    assert len(re.findall(r'class="hit"', either.content.decode())) == 2

    bad = client.get("/search/", {"q": "upload", "filters": "team support"})
    assert bad.status_code == 400 and "is not a filter: write field = value." in bad.content.decode()
    unsafe = client.get("/search/", {"q": "upload", "filters": "bad field! = x"})
    assert unsafe.status_code == 400 and b'role="alert"' in unsafe.content


def test_filter_parsing_matches_text_and_typed_values() -> None:
    assert parse_filters("team = support") == {"team": "support"}
    assert parse_filters("year=2024; draft = true\nscore = 0.5") == {
        "year": ("2024", 2024), "draft": ("true", True), "score": ("0.5", 0.5)}
    assert parse_filters("team = a\nteam = b\nteam = a") == {"team": ("a", "b")}
    assert parse_filters("  \n ; ") == {}


def test_highlighting_escapes_every_piece() -> None:
    assert query_terms('uploads "the files" -draft <em> boxes watching x') == ["upload", "watch", "file", "box", "em"]
    pattern = terms_pattern(["upload", "b"])
    assert highlight("<b>Uploaded</b> & done", pattern) == "&lt;<mark>b</mark>&gt;<mark>Uploaded</mark>&lt;/<mark>b</mark>&gt; &amp; done"
    assert highlight("<i>", None) == "&lt;i&gt;"
    long = "x " * 300 + "the upload happens here " + "y " * 300
    cut = snippet(long, terms_pattern(["upload"]), size=100)
    assert cut.startswith("… ") and cut.endswith(" …") and "<mark>upload</mark>" in cut and len(cut) < 160
    # Markdown heading marks are markup, not words: a passage's "## Uploads" reads "Uploads".
    assert snippet("# Guide\n\n## Uploads\nEditors upload files. Not #1 though.", terms_pattern(["upload"])) == (
        "Guide <mark>Uploads</mark> Editors <mark>upload</mark> files. Not #1 though.")


# --- error pages: Quarry's own, styled under the page policy, in every mode -----------------------------------

debug_modes = pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])


def quarry_page(response: Any, status: int, heading: str) -> str:
    """Quarry's error template (base.html, the site's stylesheet) under the strict page policy; its text."""
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    text = response.content.decode()
    assert f">{heading}</h1>" in text and '/static/chat/quarry.css"' in text, text[:500]
    # Nothing inline for the policy to block (Django's own error pages style themselves inline).
    assert "<style" not in text and "style=" not in text and "<script" not in text
    assert "style-src 'self';" in response["Content-Security-Policy"]
    return text


@debug_modes
def test_a_missing_page_is_quarrys_404(corpus: World, settings, debug: bool) -> None:  # type: ignore[no-untyped-def]
    settings.DEBUG = debug
    quarry_page(Client().get("/nope"), 404, "Not found")
    # Raised by a view (an unknown document) as well as by the URL map.
    quarry_page(signed_in(corpus.teammate).get("/documents/missing"), 404, "Not found")
    # A missing slash is still added by a redirect, not answered 404.
    assert Client().get("/search").status_code == 301


@debug_modes
def test_a_host_we_do_not_serve_is_quarrys_400(db: None, settings, debug: bool) -> None:  # type: ignore[no-untyped-def]
    settings.DEBUG = debug
    response = Client().get("/login/", HTTP_HOST="evil.example")
    quarry_page(response, 400, "This link is not valid")
    assert "evil.example" not in response["Content-Security-Policy"]


@debug_modes
def test_a_form_without_its_csrf_token_is_quarrys_403(db: None, settings, debug: bool) -> None:  # type: ignore[no-untyped-def]
    settings.DEBUG = debug
    response = Client(enforce_csrf_checks=True).post("/login/", {"username": "someone", "password": "x"})
    assert "reload the page" in quarry_page(response, 403, "Forbidden")


@debug_modes
def test_a_bug_in_a_page_is_quarrys_500_with_the_request_id(corpus: World, settings, debug: bool) -> None:  # type: ignore[no-untyped-def]
    settings.DEBUG = debug
    settings.QUARRY_RAG_BACKEND = {"CLASS": "tests.backends.BuggyDriver", "OPTIONS": {}}
    # The tenant's admin: a member's search needs a backend that enforces access lists (issue 34), which
    # this seed-shaped driver is not, and is refused before it runs; the admin's reaches its bug.
    client = signed_in(corpus.owner, raise_request_exception=False)
    response = client.get("/search/", {"q": "upload", "mode": "keyword"}, HTTP_X_REQUEST_ID="page-bug-1234")
    text = quarry_page(response, 500, "Something went wrong")
    assert "page-bug-1234" in text and "tripped over itself" not in text
