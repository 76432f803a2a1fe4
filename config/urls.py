"""URL map. The JSON API lives under /v1/."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from accounts import api as accounts_api
from accounts.web import content_security_policy_for_redoc
from chat.api import actions as actions_api
from chat.api import agent as agent_api
from chat.api import chat as chat_api
from chat.api import conversations as conversations_api
from chat.api import files as files_api
from knowledge import api as knowledge_api
from knowledge.sources import api as sources_api
from config import views


class RedocView(SpectacularRedocView):
    """Redoc under the page policy plus the inline styles and blob: worker its renderer needs."""

    @extend_schema(exclude=True)  # a page, not an operation (the parent's get says so; this override must too)
    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = content_security_policy_for_redoc(request)
        return response

# The admin's header and tab titles name the product (templates/admin/base_site.html shows them).
admin.site.site_header = "Quarry administration"
admin.site.site_title = "Quarry admin"

api_v1 = [
    path("me", accounts_api.MeApi.as_view(), name="me"),
    path("tokens", accounts_api.TokenListApi.as_view(), name="tokens"),
    path("tokens/<int:token_id>", accounts_api.TokenDetailApi.as_view(), name="token-detail"),
    path("groups", accounts_api.GroupListApi.as_view(), name="groups"),
    path("groups/<str:name>", accounts_api.GroupDetailApi.as_view(), name="group-detail"),
    path("groups/<str:name>/members", accounts_api.GroupMembersApi.as_view(), name="group-members"),
    path("groups/<str:name>/members/<str:username>", accounts_api.GroupMemberDetailApi.as_view(), name="group-member-detail"),
    path("search", knowledge_api.SearchApi.as_view(), name="search"),
    path("chunks/fetch", knowledge_api.ChunkFetchApi.as_view(), name="chunks-fetch"),
    path("chat/sessions", conversations_api.ChatSessionsApi.as_view(), name="chat-sessions"),
    path("chat/sessions/<str:session_id>", conversations_api.ChatSessionDetailApi.as_view(), name="chat-session-detail"),
    path("chat/sessions/<str:session_id>/files", files_api.SessionFilesApi.as_view(), name="chat-session-files"),
    path("chat/sessions/<str:session_id>/files/passages", files_api.SessionFilePassagesApi.as_view(), name="chat-session-file-passages"),
    path("chat/sessions/<str:session_id>/files/<str:file_id>", files_api.SessionFileDetailApi.as_view(), name="chat-session-file"),
    path("graph/picture", knowledge_api.GraphPictureApi.as_view(), name="graph-picture"),
    path("chat/completions", chat_api.chat_completions, name="chat-completions"),
    path("chat/sessions/<str:session_id>/turns/<str:turn_id>/regenerate", actions_api.turn_regenerate, name="chat-turn-regenerate"),
    path("chat/sessions/<str:session_id>/turns/<str:turn_id>/edit", actions_api.turn_edit, name="chat-turn-edit"),
    path("chat/sessions/<str:session_id>/turns/<str:turn_id>/select", actions_api.SelectApi.as_view(), name="chat-turn-select"),
    path("chat/sessions/<str:session_id>/turns/<str:turn_id>/feedback", actions_api.FeedbackApi.as_view(), name="chat-turn-feedback"),
    path("agent/sessions", conversations_api.AgentSessionsApi.as_view(), name="agent-sessions"),
    path("agent/sessions/<str:session_id>", conversations_api.AgentSessionDetailApi.as_view(), name="agent-session-detail"),
    path("agent/completions", agent_api.agent_completions, name="agent-completions"),
    path("agent/runs/<str:run_id>", conversations_api.AgentRunDetailApi.as_view(), name="agent-run-detail"),
    path("agent/runs/<str:run_id>/resume", agent_api.agent_run_resume, name="agent-run-resume"),
    path("agent/runs/<str:run_id>/feedback", actions_api.AgentFeedbackApi.as_view(), name="agent-run-feedback"),
    path("documents", knowledge_api.DocumentListApi.as_view(), name="documents"),
    # Before the detail route: document ids may contain "/", so "upload" is reserved here.
    path("documents/upload", knowledge_api.DocumentUploadApi.as_view(), name="documents-upload"),
    path("documents/<path:document_id>", knowledge_api.DocumentDetailApi.as_view(), name="document-detail"),
    path("sources", sources_api.SourceListApi.as_view(), name="sources"),
    path("sources/<int:source_id>", sources_api.SourceDetailApi.as_view(), name="source-detail"),
    path("sources/<int:source_id>/sync", sources_api.SourceSyncApi.as_view(), name="source-sync"),
    path("schema", SpectacularAPIView.as_view(permission_classes=[], authentication_classes=[]), name="schema"),
    # The split view serves Swagger UI's set-up as a script file: the Content-Security-Policy allows no inline script.
    path("docs", SpectacularSwaggerSplitView.as_view(url_name="v1:schema", permission_classes=[], authentication_classes=[]), name="docs"),
    # Redoc from the sidecar's static files; templates/drf_spectacular/redoc.html drops the stock page's web fonts.
    path("redoc.js", views.redoc_script, name="redoc-script"),
    path("redoc", RedocView.as_view(url_name="v1:schema", permission_classes=[], authentication_classes=[]), name="redoc"),
]

# Under /v1/ these answer in the API's JSON error shape, elsewhere with the HTML pages.
handler400 = "config.views.bad_request"
handler403 = "config.views.permission_denied"
handler404 = "config.views.page_not_found"
handler500 = "config.views.server_error"

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("v1/", include((api_v1, "v1"))),
    # The end users' pages: "/" is the chat (sign-in first), plus search and documents.
    path("", include("accounts.urls")),
    path("", include("knowledge.urls")),
    path("", include("chat.urls")),
]
