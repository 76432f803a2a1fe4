from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from accounts.models import Role
from accounts.access import CliAccessError, cli_context
from accounts.services import api_token_create, membership_ensure, user_ensure


class Command(BaseCommand):
    help = (
        "Create an API token and print only the token on stdout (so `TOKEN=$(...)` works). "
        "Creates the user and the membership when missing; never lowers an existing role."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="Tenant slug (must exist; see create_tenant).")
        parser.add_argument("--user", required=True, help="Owner's username.")
        parser.add_argument("--role", default=Role.READER, choices=[r.value for r in Role])
        parser.add_argument("--name", default="", help="A label to tell tokens apart.")

    def handle(self, *args: Any, tenant: str, user: str, role: str, name: str, **options: Any) -> None:
        try:
            found = cli_context(tenant_slug=tenant).tenant
        except CliAccessError as exc:
            raise CommandError(str(exc)) from None
        with transaction.atomic():
            owner, created = user_ensure(username=user)
            membership_ensure(user=owner, tenant=found, role=role)
            _, secret = api_token_create(tenant=found, owner=owner, role=role, name=name)
        if created:
            self.stderr.write(f"created user {user}")
        self.stdout.write(secret)
