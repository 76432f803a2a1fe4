from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from accounts.models import Role
from accounts.selectors import api_token_for_secret
from accounts.services import api_token_create, membership_ensure, tenant_create, user_ensure
from common.banner import banner


class Command(BaseCommand):
    help = (
        "Create (or reuse) the demo tenant DEFAULT, an admin user and an API token for `make run`. "
        "The credentials are kept in var/demo.json (mode 0600) so a second run prints the same ones."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--quiet", action="store_true", help="Print nothing but errors.")

    def handle(self, *args: Any, username: str, quiet: bool, **options: Any) -> None:
        path = Path(settings.QUARRY_DATA_DIR) / "demo.json"
        saved: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
        with transaction.atomic():
            tenant, _ = tenant_create(slug=settings.QUARRY_DEFAULT_TENANT, name="Demo")
            password = saved.get("password") or secrets.token_urlsafe(12)
            user, created = user_ensure(username=username, password=password, superuser=True)
            if not created and "password" not in saved:
                user.set_password(password)  # an admin made by hand: give it a known demo password
                user.save(update_fields=["password"])
            membership_ensure(user=user, tenant=tenant, role=Role.ADMIN)
            token = saved.get("token")
            if not token or api_token_for_secret(secret=token) is None:
                _, token = api_token_create(tenant=tenant, owner=user, role=Role.ADMIN, name="demo")
        saved = {"username": username, "password": password, "token": token, "tenant": tenant.slug}
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(saved, fh, indent=2)
        if not quiet:
            self.stdout.write(banner(saved, f"http://127.0.0.1:{settings.PORT}"))
