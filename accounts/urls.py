"""Sign-in pages and the tenant switcher."""

from __future__ import annotations

from django.urls import path

from accounts import views

app_name = "accounts"

urlpatterns = [
    path("login/", views.login, name="login"),
    path("logout/", views.logout, name="logout"),
    path("tenant/", views.tenant_switch, name="tenant-switch"),
]
