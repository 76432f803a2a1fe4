"""Shared fixtures: two tenants and the owner / teammate / outsider trio (STYLE 11)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import Role, Tenant
from tests.factories import make_member, make_tenant, make_token


@dataclass
class World:
    """``acme`` is ours; ``globex`` belongs to someone else.

    owner: admin of acme; editor: editor of acme; teammate: reader of acme;
    outsider: admin of globex only.
    """

    acme: Tenant
    globex: Tenant
    owner: User
    editor: User
    teammate: User
    outsider: User

    def client(self, user: User | None = None, *, tenant: Tenant | None = None, role: Role | str | None = None) -> APIClient:
        """An API client carrying a bearer token of ``user`` (anonymous when None)."""
        client = APIClient()
        if user is not None:
            tenant = tenant or (self.globex if user == self.outsider else self.acme)
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(tenant, user, role)}")
        return client


@pytest.fixture
def world(db: None) -> World:
    acme, globex = make_tenant("acme"), make_tenant("globex")
    return World(
        acme=acme,
        globex=globex,
        owner=make_member(acme, Role.ADMIN, "owner"),
        editor=make_member(acme, Role.EDITOR, "editor"),
        teammate=make_member(acme, Role.READER, "teammate"),
        outsider=make_member(globex, Role.ADMIN, "outsider"),
    )
