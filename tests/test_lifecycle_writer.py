"""One writer of a document's lifecycle (issue 32): status, lease and generation change only in
``knowledge.models.lifecycle``, whose transitions everything else calls.

Read from the source, as the layering test reads imports: an ORM ``update`` that sets a lifecycle
field, or SQL that updates one in ``knowledge_document``, anywhere else in the product fails.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.servers import ROOT

OWNER = Path("knowledge/models/lifecycle.py")
PRODUCT = ("accounts", "knowledge", "chat", "config", "common")
# The fields the lifecycle owns; ``status`` counts when it is a DocumentStatus.
LEASE_FIELDS = {"lease_id", "lease_expires_at", "generation", "attempts", "cancel_requested", "cancelled"}
_SQL = re.compile(r"UPDATE\s+knowledge_document\b.*?\bSET\b.*?\b(status|lease_id|lease_expires_at|generation)\s*=", re.S | re.I)
_UPSERT = re.compile(r"INTO\s+knowledge_document\b.*?DO\s+UPDATE\s+SET\b.*?\b(status|lease_id|lease_expires_at|generation)\s*=", re.S | re.I)


def _writes(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
            for keyword in node.keywords:
                if keyword.arg in LEASE_FIELDS or (keyword.arg == "status" and "DocumentStatus" in ast.unparse(keyword.value)):
                    found.append((node.lineno, f".update({keyword.arg}=...)"))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (_SQL.search(node.value) or _UPSERT.search(node.value)):
            found.append((node.lineno, "SQL writing a lifecycle column of knowledge_document"))
    return found


def test_only_the_lifecycle_module_writes_status_lease_and_generation() -> None:
    offenders = []
    for app in PRODUCT:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative == OWNER or "migrations" in relative.parts:
                continue
            for line, what in _writes(ast.parse(path.read_text(encoding="utf-8"))):
                offenders.append(f"{relative}:{line}: {what}")
    assert offenders == [], "lifecycle written outside knowledge.models.lifecycle:\n" + "\n".join(offenders)


def test_the_check_sees_what_it_forbids() -> None:
    """The rule above is not vacuous: the shapes it forbids are found (the old hand-written copies)."""
    source = (
        "row.update(status=DocumentStatus.QUEUED, lease_id='')\n"
        "cursor.execute('UPDATE knowledge_document SET lease_expires_at = now() WHERE id = %s')\n"
        "cursor.execute('INSERT INTO knowledge_document (x) VALUES (1) ON CONFLICT (x) DO UPDATE SET status = 1')\n"
        "migration.update(status='done')\n"
    )
    assert [line for line, _ in _writes(ast.parse(source))] == [1, 1, 2, 3]
