from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant (no-op when it exists)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="", help="Display name (default: the slug).")

    def handle(self, *args: Any, slug: str, name: str, **options: Any) -> None:
        try:
            tenant, created = tenant_create(slug=slug, name=name)
        except ValidationError as exc:
            raise CommandError(f"invalid tenant slug {slug!r}: {' '.join(exc.messages)}") from None
        self.stdout.write(f"{'created' if created else 'exists'}: tenant {tenant.slug}")
