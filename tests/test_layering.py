"""The dependency direction of DESIGN section 1, checked on every import of the product's code.

Inside an app: models -> selectors (reads) -> services (writes) -> interfaces (api, views,
consumers, tasks, admin, commands). ``knowledge.rag`` is the typed RAG API between the
models and the selectors. ``chat`` imports ``knowledge.rag`` (and ``knowledge.models``
for reads it must do), and writes only through ``knowledge.services.stores``;
``knowledge`` and ``accounts`` never import ``chat``; only the wiring in ``config`` (URLs,
routing, ASGI) imports the apps, and no app imports ``config``. ``common`` holds the helpers
every app may import (serializers, throttling, database steps, schedules); it imports no app.

``ALLOWED`` is the whole list of permitted edges between components; an import that is
not in it (at module level or inside a function) fails the test, and so does a module
that no component claims.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.servers import ROOT

APPS = ("accounts", "knowledge", "chat", "config", "common")

# Module prefix -> component. The longest matching prefix wins.
COMPONENTS: dict[str, str] = {
    "accounts.models": "accounts.models",
    "accounts.selectors": "accounts.selectors",
    "accounts.services": "accounts.services",
    "accounts.access": "accounts.access",  # THE tenant resolution, for every way in
    "accounts.web": "accounts.web",  # what every HTML page shares
    "accounts.permissions": "accounts.access",
    "accounts.authentication": "accounts.interfaces",
    "accounts.api": "accounts.interfaces",
    "accounts.views": "accounts.interfaces",
    "accounts.admin": "accounts.interfaces",
    "accounts.urls": "accounts.interfaces",
    "accounts.management": "accounts.interfaces",
    "accounts.apps": "accounts.interfaces",
    "accounts": "accounts.interfaces",
    "knowledge.models": "knowledge.models",
    "knowledge.rag": "knowledge.rag",
    "knowledge.graph": "knowledge.graph",  # extraction, graph SQL and the graph's reads: a service over the RAG API
    "knowledge.extraction": "knowledge.extraction",
    "knowledge.highlight": "knowledge.highlight",
    "knowledge.selectors": "knowledge.selectors",
    "knowledge.services.stores": "knowledge.stores",  # the one door through which another app writes
    "knowledge.services": "knowledge.services",
    "knowledge.evaluation": "knowledge.services",
    "knowledge.forms": "knowledge.forms",
    "knowledge.api": "knowledge.interfaces",
    "knowledge.views": "knowledge.interfaces",
    "knowledge.admin": "knowledge.interfaces",
    "knowledge.tasks": "knowledge.interfaces",
    "knowledge.urls": "knowledge.interfaces",
    "knowledge.management": "knowledge.interfaces",
    "knowledge.apps": "knowledge.interfaces",
    "knowledge": "knowledge.interfaces",
    "chat.models": "chat.models",
    "chat.events": "chat.events",  # event, response and error types: no logic
    "chat.prompting": "chat.prompting",
    "chat.llm": "chat.llm",
    "chat.selectors": "chat.selectors",
    "chat.services": "chat.services",
    # A conversation's attached files: reads, and writes through the knowledge base's write door.
    "chat.files.selectors": "chat.files.selectors",
    "chat.files.services": "chat.files.services",
    "chat.files": "chat.files.selectors",
    "chat.retrieval": "chat.retrieval",  # the one retrieval for the pipeline, the agent's tools and MCP
    "chat.pipeline": "chat.pipeline",  # the one answer generator
    "chat.agent": "chat.agent",
    "chat.mcp": "chat.mcp",  # the MCP server: adapters over the agent's tools, and its HTTP transport
    "chat.checks": "chat.interfaces",
    "chat.api": "chat.interfaces",
    "chat.views": "chat.interfaces",
    "chat.consumers": "chat.interfaces",
    "chat.urls": "chat.interfaces",
    "chat.management": "chat.interfaces",
    "chat.apps": "chat.interfaces",
    "chat.admin": "chat.interfaces",
    "chat": "chat.interfaces",
    "knowledge.sources.models": "knowledge.sources.models",
    "knowledge.sources.crypto": "knowledge.sources.crypto",  # secrets at rest: framework-only
    "knowledge.sources.connectors": "knowledge.sources.connectors",  # one module per kind: list and fetch, no database, no tenants
    "knowledge.sources.selectors": "knowledge.sources.selectors",
    "knowledge.sources.services": "knowledge.sources.services",
    "knowledge.sources.api": "sources.interfaces",
    "knowledge.sources.admin": "sources.interfaces",
    "knowledge.sources.tasks": "sources.interfaces",
    "knowledge.sources.management": "sources.interfaces",
    "knowledge.sources.apps": "sources.interfaces",
    "knowledge.sources": "sources.interfaces",
    "config.urls": "config.wiring",
    "config.routing": "config.wiring",
    "config.asgi": "config.wiring",
    "config": "config.framework",  # settings, env, errors, middleware, embedded database, serve: imported by no app
    "common": "common",  # helpers every app shares; they import no app
}

_ACCOUNTS_READS = {"accounts.models", "accounts.selectors"}
_RAG = {"knowledge.rag", "knowledge.models", "accounts.models"}

ALLOWED: dict[str, set[str]] = {
    "accounts.models": set(),
    "accounts.selectors": {"accounts.models"},
    # common: a change of who may read what pins the tenant to the primary (common.replicas).
    "accounts.services": {"accounts.models", "common"},
    "accounts.access": _ACCOUNTS_READS,
    "accounts.web": _ACCOUNTS_READS | {"accounts.access"},
    "accounts.interfaces": _ACCOUNTS_READS | {"accounts.services", "accounts.access", "accounts.web", "common"},
    "knowledge.models": set(),
    # The graph stands above the RAG API: the backend calls it only through knowledge.rag.hooks
    # (ChunkIndexHook inside its writes, GraphReads behind RAGService's graph methods), built from
    # settings by dotted path; everything above reaches the graph through knowledge.rag (chat included).
    "knowledge.graph": {"knowledge.models", "knowledge.rag"},
    "knowledge.rag": {"knowledge.models", "accounts.models", "common"},
    "knowledge.extraction": {"knowledge.rag"},
    "knowledge.highlight": set(),
    "knowledge.selectors": _RAG,
    "knowledge.services": _RAG | {"knowledge.selectors", "knowledge.extraction", "knowledge.graph", "common"},
    # Private stores (a conversation's files) over the editors' write door.
    "knowledge.stores": _RAG | {"knowledge.services"},
    "knowledge.forms": _RAG | {"knowledge.services", "knowledge.extraction", "common"},
    "knowledge.interfaces": _RAG | {
        "knowledge.selectors", "knowledge.services", "knowledge.extraction", "knowledge.forms", "knowledge.highlight",
        "knowledge.sources.models",  # a document's change page names the source that wrote it
        "accounts.selectors", "accounts.services", "accounts.access", "accounts.web", "common",
    },
    "chat.models": set(),
    "chat.events": {"common"},
    "chat.prompting": {"knowledge.rag"},
    # The offline model shares extraction's furniture detector and embeds with the local embedder.
    "chat.llm": {"chat.events", "knowledge.rag"},
    "chat.selectors": {"chat.models", "chat.prompting", "accounts.models", "common"},
    "chat.files.selectors": _RAG | {"chat.models", "common"},
    # The one edge from chat to knowledge's services: attached files take the editors' pipeline
    # (store, queue, extract, chunk, embed) into a private store, through the stores door only.
    "chat.files.services": _RAG | {"chat.models", "chat.files.selectors", "knowledge.stores", "common"},
    "chat.services": {"chat.models", "accounts.models", "chat.files.services"},
    # The diagnostics' sentences, and the offline model's bridge query for the second hop.
    "chat.retrieval": _RAG | {"chat.events", "chat.llm"},
    "chat.pipeline": _RAG | {"chat.models", "chat.events", "chat.prompting", "chat.llm", "chat.selectors", "chat.services", "common",
                             "chat.files.selectors", "chat.retrieval"},
    "chat.agent": _RAG | {"chat.models", "chat.events", "chat.prompting", "chat.llm", "chat.selectors", "chat.services", "common",
                          "chat.retrieval"},
    # An interface like the API: the agent's tools, the tenant resolution, and (HTTP) the token lookup
    # and its last-used stamp, as the REST API's authenticator does them.
    "chat.mcp": _RAG | {"chat.agent", "chat.events", "accounts.selectors", "accounts.services", "accounts.access", "common"},
    "chat.interfaces": _RAG | {
        "chat.models", "chat.events", "chat.prompting", "chat.llm", "chat.selectors", "chat.services", "chat.pipeline",
        "chat.agent", "chat.mcp", "accounts.selectors", "accounts.access", "accounts.web", "common",
        "chat.files.selectors", "chat.files.services", "chat.retrieval",
    },
    "knowledge.sources.models": set(),
    "knowledge.sources.crypto": set(),
    "knowledge.sources.connectors": set(),
    # Documents and readers: a sync's errors name items, shown only to those who may read their documents.
    "knowledge.sources.selectors": _RAG | {"knowledge.sources.models"},
    # Documents are written only through the editors' write door (knowledge.services.documents, and
    # its id rule knowledge.services.file_ids): checked module by module in test_sources_write_only_through_the_door.
    "knowledge.sources.services": {"knowledge.sources.models", "knowledge.sources.selectors", "knowledge.sources.crypto", "knowledge.sources.connectors", "accounts.models",
                         "knowledge.models", "knowledge.services", "knowledge.extraction", "common"},
    "sources.interfaces": {"knowledge.sources.models", "knowledge.sources.selectors", "knowledge.sources.services", "knowledge.sources.connectors", "accounts.models",
                           "accounts.selectors", "accounts.access", "accounts.web", "common"},
    "config.framework": {"common"},
    "common": set(),
    # accounts.web: the Redoc page (config.urls) carries that app's page policy, widened for Redoc.
    "config.wiring": {"config.framework", "accounts.interfaces", "accounts.web", "knowledge.interfaces", "chat.interfaces", "chat.mcp",
                      "sources.interfaces"},
}


def component(module: str) -> str | None:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        found = COMPONENTS.get(".".join(parts[:n]))
        if found is not None:
            return found
    return None


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(path: Path, module: str) -> list[tuple[int, str]]:
    """``(line, module imported)`` for every import of our own packages in ``path``, nested ones included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                # ``from knowledge import rag`` imports the module knowledge.rag; ``from x import Name`` imports x.
                target = f"{base}.{alias.name}"
                found.append((node.lineno, target if _is_module(target) else base))
    return [(line, name) for line, name in found if name.split(".")[0] in APPS]


def product_modules() -> list[tuple[Path, str]]:
    modules = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue  # generated, and frozen in time: they must not change when the code does
            dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules.append((path, dotted.removesuffix(".__init__")))
    return modules


def test_every_module_belongs_to_a_component() -> None:
    unclaimed = [dotted for _, dotted in product_modules() if component(dotted) is None]
    assert unclaimed == []
    assert set(COMPONENTS.values()) == set(ALLOWED)


def test_no_import_goes_against_the_dependency_direction() -> None:
    violations = []
    for path, dotted in product_modules():
        source = component(dotted)
        for line, imported in imports_of(path, dotted):
            target = component(imported)
            if target is not None and target != source and target not in ALLOWED[source]:
                violations.append(f"{path.relative_to(ROOT)}:{line} ({source}) imports {imported} ({target})")
    assert violations == [], "\n".join(violations)


def test_the_rag_layer_imports_neither_the_graph_nor_the_services() -> None:
    """Issue 32 item 2: the graph and the services stand above knowledge.rag (stated in ALLOWED; checked here by name)."""
    importing = {
        f"{dotted} -> {name}" for path, dotted in product_modules() if component(dotted) == "knowledge.rag"
        for _, name in imports_of(path, dotted) if component(name) in ("knowledge.graph", "knowledge.services", "knowledge.stores")
    }
    assert importing == set()


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The test above could pass by seeing nothing: show it reads nested and relative imports."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from knowledge.services import documents\n    from .rag import types\n")
    assert imports_of(probe, "knowledge.selectors") == [(2, "knowledge.services.documents"), (3, "knowledge.rag.types")]
    assert component("knowledge.services.documents") not in ALLOWED["knowledge.selectors"]
    assert "knowledge.services" not in ALLOWED["chat.pipeline"] and "chat.pipeline" not in ALLOWED["chat.agent"]


def test_sources_write_only_through_the_door() -> None:
    """Of knowledge's services, sources import only the write door and its id rule."""
    door = {"knowledge.services.documents", "knowledge.services.file_ids"}
    reached = {
        imported for path, dotted in product_modules() if dotted.startswith("knowledge.sources.")
        for _, imported in imports_of(path, dotted) if imported.startswith("knowledge.services")
    }
    assert reached and reached <= door, reached
