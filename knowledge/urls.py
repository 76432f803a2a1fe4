"""The readers' knowledge pages."""

from __future__ import annotations

from django.urls import path

from knowledge import views

app_name = "knowledge"

urlpatterns = [
    path("search/", views.search_page, name="search"),
    # Document ids may contain "/" (e.g. "demo/what-is-quarry").
    path("documents/<path:document_id>", views.document_page, name="document"),
]
