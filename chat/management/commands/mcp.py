"""``manage.py mcp --tenant SLUG [--user NAME]``: the MCP retrieval tools over stdio, for desktop clients.

The same server and tools as ``/mcp`` (``chat.mcp``), one connection on stdin/stdout, run
as one caller for its whole life:

- with ``QUARRY_MCP_TOKEN`` in the environment, as that API token (its tenant, the lower of
  its role and its owner's; ``--tenant``, if given, must be the token's);
- otherwise as the shell (``accounts.access.cli_context``): the ``cli`` principal, or
  ``--user``, a member of the tenant, with their role.

stdout carries JSON-RPC only; logs go to stderr.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from mcp.server.stdio import stdio_server
from rest_framework import exceptions

from accounts.access import CliAccessError, TenantContext, cli_context, token_tenant_context
from accounts.selectors import api_token_for_secret
from chat.mcp.server import CALLER, build_server

TOKEN_ENV = "QUARRY_MCP_TOKEN"


class Command(BaseCommand):
    help = "Serve the knowledge base's MCP retrieval tools on stdio (for Claude Desktop, VS Code, ...)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", help="Tenant slug (required unless QUARRY_MCP_TOKEN names the tenant).")
        parser.add_argument("--user", help="Act as this member of the tenant (default: the 'cli' principal).")

    def handle(self, *args: Any, **options: Any) -> None:
        ctx = self._caller(options["tenant"], options["user"])
        asyncio.run(self._serve(ctx))

    def _caller(self, slug: str | None, username: str | None) -> TenantContext:
        secret = os.environ.get(TOKEN_ENV, "").strip()
        if secret:
            if username:
                raise CommandError(f"--user and {TOKEN_ENV} exclude each other: the token names its owner.")
            token = api_token_for_secret(secret=secret)
            if token is None or not token.owner.is_active:
                raise CommandError(f"{TOKEN_ENV} is not a valid API token (unknown, revoked, or its owner is deactivated).")
            try:
                return token_tenant_context(token=token, slug=slug)
            except exceptions.APIException as exc:
                raise CommandError(f"{exc.detail} (the token belongs to tenant {token.tenant.slug})") from None
        if not slug:
            raise CommandError(f"--tenant is required (or set {TOKEN_ENV} to an API token).")
        try:
            return cli_context(tenant_slug=slug, username=username)
        except CliAccessError as exc:
            raise CommandError(str(exc)) from None

    async def _serve(self, ctx: TenantContext) -> None:
        server = build_server()
        CALLER.set(ctx)  # every task of the connection inherits it
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
