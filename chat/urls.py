"""The web chat's pages; the answers stream over ``/ws/chat/`` (config/routing.py)."""

from __future__ import annotations

from django.urls import path

from chat import views

app_name = "chat"

urlpatterns = [
    path("", views.chat_page, name="chat"),
    path("chat/sessions", views.session_list, name="session-list"),
    path("chat/sessions/<str:session_id>/rename", views.session_rename, name="session-rename"),
    path("chat/sessions/<str:session_id>/delete", views.session_delete, name="session-delete"),
]
