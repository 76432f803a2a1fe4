"""``manage.py chat "MESSAGE" (--tenant SLUG | --session ID) [--json]``: one grounded answer from the shell.

Without ``--session`` a new session is started in ``--tenant`` (its id is printed, so
the next call can continue it). ``--session`` alone continues a session in its own
tenant (session ids are unique); ``--tenant`` beside it is a check that it is that one.
The answer streams to stdout as it is generated, then its sources; ``--json`` prints
instead the envelope ``POST /v1/chat/completions`` answers with. Sessions belong to the principal ``cli`` unless ``--user`` names
a member of the tenant, whose sessions (web, API) it then continues.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.access import CliAccessError, cli_context
from chat.models import ChatSession, SessionKind
from chat.pipeline import ChatFailed, answer, answer_stream
from chat.prompting import TEMPLATES
from chat.selectors import chat_session_find, chat_session_tenant_slug
from chat.services import chat_session_create
from knowledge import rag
from knowledge.rag import limits

class Command(BaseCommand):
    help = "Ask a grounded question of a tenant's knowledge base (the same pipeline as the chat API)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("message", help="The question.")
        parser.add_argument("--tenant", help="Tenant slug; needed to start a session, optional with --session (a check).")
        parser.add_argument("--session", help="Continue this session (session-...) in its tenant; default: start a new one.")
        parser.add_argument("--user", help="Act as this member of the tenant (default: the 'cli' principal).")
        parser.add_argument("--template", choices=TEMPLATES, default="default", help="Prompt template.")
        parser.add_argument("--json", action="store_true", help="Print the HTTP API's JSON envelope.")

    def handle(self, *args: Any, **options: Any) -> None:
        message: str = options["message"]
        if not message.strip():
            raise CommandError("The message is empty.")
        if len(message) > limits.MAX_QUERY_CHARS or "\x00" in message:
            raise CommandError(f"The message must be at most {limits.MAX_QUERY_CHARS} characters, without NUL.")
        try:
            ctx = cli_context(tenant_slug=self._tenant_slug(options["tenant"], options["session"]), username=options["user"])
        except CliAccessError as exc:
            raise CommandError(str(exc)) from None
        session = self._session(ctx.tenant, ctx.principal, options["session"])
        reader = rag.reader_of(ctx)  # --user reads as that member; the shell's cli reads everything
        if options["json"]:
            try:
                body: Any = async_to_sync(answer)(session=session, prompt=message, reader=reader, template=options["template"])
            except ChatFailed as failure:
                self.stdout.write(json.dumps(failure.error, indent=2))
                raise CommandError(failure.error["detail"]) from None
            self.stdout.write(json.dumps(body, indent=2, ensure_ascii=False))
            return
        async_to_sync(self._stream)(session, message, options["template"], reader)

    def _tenant_slug(self, tenant: str | None, session_id: str | None) -> str:
        """The tenant to act in: ``--tenant``, else the session's own; both given, they must agree."""
        if session_id is None:
            if tenant is None:
                raise CommandError("Name the tenant to start a session in (--tenant SLUG), or a session to continue (--session ID).")
            return tenant
        owner = chat_session_tenant_slug(session_id=session_id)
        if tenant is None:
            if owner is None:
                raise CommandError(f"No session {session_id!r}; session ids look like session-..., as this command prints them.")
            return owner
        if owner is not None and owner != tenant:
            raise CommandError(f"Session {session_id!r} is in tenant {owner}, not {tenant}; leave out --tenant to continue it there.")
        return tenant

    def _session(self, tenant: Any, principal: str, session_id: str | None) -> ChatSession:
        if session_id is None:
            return chat_session_create(tenant=tenant, principal=principal)
        session = chat_session_find(tenant=tenant, principal=principal, session_id=session_id, kind=SessionKind.CHAT)
        if session is None:
            raise CommandError(f"No session {session_id!r} of {principal} in tenant {tenant.slug}.")
        return session

    async def _stream(self, session: ChatSession, message: str, template: str, reader: rag.Reader | None) -> None:
        """Print the answer as the model writes it, then the passages it cites under the numbers its
        printed markers use: the stream's text keeps the model's numbering, that of the first
        (``citations``) event, while ``completed`` lists the cited passages renumbered by first use."""
        out = self.stdout
        context: dict[str, int] = {}  # chunk id -> the number the model saw it under
        async with aclosing(answer_stream(session=session, prompt=message, reader=reader, template=template)) as events:
            async for event in events:
                name, data = event["event"], event["data"]
                if name == "citations":
                    context = {c["chunk_id"]: n for n, c in enumerate(data["citations"], start=1)}  # type: ignore[typeddict-item]
                elif name == "text_delta":
                    out.write(data["text"], ending="")  # type: ignore[typeddict-item]
                    out.flush()
                elif name == "completed":
                    citations = data["citations"]  # type: ignore[typeddict-item]
                    out.write("")
                    if citations:
                        out.write("\nSources:")
                        for citation in citations:
                            origin = ", a file attached to the conversation" if "file_id" in citation else ""
                            out.write(f"  [{context[citation['chunk_id']]}] {citation['chunk_id']}  (score {citation['score']:.4f}{origin})")
                    self.stderr.write(
                        f"session {session.public_id} · {data['model']} via {data['provider']}/{data['provider_model']}"  # type: ignore[typeddict-item]
                    )
                elif name == "error":
                    out.write("")
                    raise CommandError(data["detail"])  # type: ignore[typeddict-item]
