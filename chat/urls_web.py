"""The end users' web pages (``chat.views``); the chat streams over ``/ws/chat/`` (config/routing.py)."""

from __future__ import annotations

from django.urls import path

from chat import views

app_name = "web"

urlpatterns = [
    path("", views.chat_page, name="chat"),
    path("login/", views.login, name="login"),
    path("logout/", views.logout, name="logout"),
    path("tenant/", views.tenant_switch, name="tenant-switch"),
    path("search/", views.search_page, name="search"),
    # Document ids may contain "/" (e.g. "demo/what-is-quarry").
    path("documents/<path:document_id>", views.document_page, name="document"),
    path("chat/sessions", views.session_list, name="session-list"),
    path("chat/sessions/<str:session_id>/rename", views.session_rename, name="session-rename"),
    path("chat/sessions/<str:session_id>/delete", views.session_delete, name="session-delete"),
]
