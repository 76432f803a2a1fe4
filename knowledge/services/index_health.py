"""Health of the shared search indexes, and their repair without downtime (issue 22).

Every tenant's chunks share one HNSW index per dimension (``chunk_embedding_hnsw_<d>``),
one GIN index over ``search_vector`` and one postings b-tree. A large tenant's deletion
or re-import leaves their pages full of dead entries; vacuum marks them free, but in
HNSW the chunks inserted afterwards land in a graph of holes and are badly connected
(issue 22: another tenant's new documents lost a fifth of their semantic recall).
Nothing in the index's own statistics says so (pgstattuple does not read HNSW), so the
measure is its size per live row:

    bloat = size / (live rows x bytes per entry when fresh)

"When fresh" is the index's size per row just after its last rebuild (``IndexRebuild``),
or for an HNSW index never rebuilt here, pgvector's page layout estimated from the
dimension (``_hnsw_fresh_bytes``), and for the GIN and postings indexes a size per row measured
on an index that never churned, with a margin (``_FIXED_FRESH_BYTES``).

``indexes_repair`` (the scheduled task, every ``REPAIR_SCHEDULE_MINUTES``) rebuilds the
worst index at or above ``QUARRY_INDEX_REBUILD_BLOAT`` with ``REINDEX INDEX
CONCURRENTLY``: searches and writes go on meanwhile (it takes no lock that blocks them;
it waits for transactions already running). One rebuild at a time in the whole
cluster (a session advisory lock). A rebuild interrupted (a worker killed) leaves an
invalid ``<name>_ccnew`` index that would slow every write: the next rebuild drops it first.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone
from django_q.models import Schedule

from common.schedules import schedule_ensure
from knowledge.models import IndexRebuild

REPAIR_TASK = "knowledge.tasks.repair_indexes"
# Keep in sync with migration 0011, which creates the schedule.
REPAIR_SCHEDULE_NAME = "knowledge: repair bloated search indexes"
REPAIR_SCHEDULE_MINUTES = 10
_LOCK = "quarry: reindex concurrently"
_HNSW = re.compile(r"^chunk_embedding_hnsw_(\d+)$")
# The fixed indexes watched besides the HNSW ones, and the table each belongs to.
_FIXED = {"chunk_search_vector_gin": "knowledge_chunk", "posting_term_impact": "knowledge_posting"}
_PAGE = 8192
# pgvector's HNSW (m = 16) stores per chunk an element tuple (the value, plus its header and heap
# pointers) and its neighbours; pages are filled whole. The value is the chunk's halfvec (migration 0022):
# 2 bytes a dimension and an 8-byte header. Measured on pgvector 0.8.6 at 100,000 384-dimension vectors
# (bench/hnsw_recall.py): 1,170 bytes a row over halfvec, 2,048 over vector (4 bytes a dimension) and 349
# over the sign bits; this overhead gives each of the three (7, 4 and 23 rows a page).
_HNSW_TUPLE_OVERHEAD = 290

# Bytes per live row of the fixed indexes when they have not churned, with a 1.5x margin so that an
# estimate never asks for a rebuild a measured baseline would not (after the first rebuild the
# measured one is used). Measured on SciFact (15,276 chunks, 1,164,030 postings, built by ingestion,
# nothing deleted): the GIN 609 bytes a chunk, the postings b-tree 79 bytes a posting. Without them the
# postings index of bench/churn.py stayed at 479 MB for 350 postings and was never due.
_FIXED_FRESH_BYTES = {"chunk_search_vector_gin": 1.5 * 609, "posting_term_impact": 1.5 * 79}

Trigger = Literal["schedule", "command"]


@dataclass(frozen=True)
class IndexHealth:
    """One watched index as it stands. ``bloat`` is None when no fresh size is known."""

    name: str
    table: str
    method: str
    size_bytes: int
    live_rows: int
    dead_rows: int  # the table's dead tuples not yet vacuumed (pg_stat_user_tables)
    fresh_bytes_per_row: float | None
    bloat: float | None
    valid: bool
    last_rebuild: str | None  # ISO time of the last successful rebuild
    last_rebuild_seconds: float | None
    needs_rebuild: bool

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def rebuild_bound() -> float:
    """Bloat at or above which the schedule rebuilds (``QUARRY_INDEX_REBUILD_BLOAT``)."""
    return float(settings.QUARRY_INDEX_REBUILD_BLOAT)


def rebuild_min_bytes() -> int:
    """Indexes smaller than this are never rebuilt by the schedule (``QUARRY_INDEX_REBUILD_MIN_BYTES``)."""
    return int(settings.QUARRY_INDEX_REBUILD_MIN_BYTES)


def _hnsw_fresh_bytes(dimension: int) -> float:
    per_page = max(1, (_PAGE - 24) // (2 * dimension + 8 + _HNSW_TUPLE_OVERHEAD))
    return _PAGE / per_page


def _chunk_count(cursor: Any) -> int:
    # Exact and cheap: the statistics rows count every tenant's chunks, changed with them.
    cursor.execute("SELECT coalesce(sum(chunk_count), 0) FROM knowledge_corpusstat")
    return int(cursor.fetchone()[0])


def index_health_report() -> list[IndexHealth]:
    """Every watched index: its size, its table's live and dead rows, its bloat, its last rebuild."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT i.relname, t.relname, am.amname, pg_relation_size(i.oid), coalesce(s.n_live_tup, 0),
                   coalesce(s.n_dead_tup, 0), x.indisvalid
            FROM pg_index x
            JOIN pg_class i ON i.oid = x.indexrelid
            JOIN pg_class t ON t.oid = x.indrelid
            JOIN pg_am am ON am.oid = i.relam
            LEFT JOIN pg_stat_user_tables s ON s.relid = t.oid
            WHERE t.relname IN ('knowledge_chunk', 'knowledge_posting')
              AND (i.relname = ANY(%s) OR i.relname ~ '^chunk_embedding_hnsw_[0-9]+$')
            ORDER BY i.relname
            """,
            [list(_FIXED)],
        )
        rows = cursor.fetchall()
        chunks = _chunk_count(cursor)
    last = {r.index_name: r for r in IndexRebuild.objects.filter(error="", finished_at__isnull=False).order_by("index_name", "-started_at").distinct("index_name")}
    report = []
    for name, table, method, size, n_live, n_dead, valid in rows:
        live = chunks if table == "knowledge_chunk" else int(n_live)
        rebuilt = last.get(name)
        fresh: float | None = None
        if rebuilt is not None and rebuilt.size_after and rebuilt.live_rows:
            fresh = rebuilt.size_after / rebuilt.live_rows
        elif (match := _HNSW.match(name)) is not None:
            fresh = _hnsw_fresh_bytes(int(match.group(1)))
        else:
            fresh = _FIXED_FRESH_BYTES.get(name)
        # An empty table's index keeps its metapage (and the pages it had): measure against one row.
        bloat = round(size / (max(live, 1) * fresh), 2) if fresh else None
        report.append(IndexHealth(
            name=name, table=table, method=method, size_bytes=int(size), live_rows=live, dead_rows=int(n_dead),
            fresh_bytes_per_row=round(fresh, 1) if fresh else None, bloat=bloat, valid=bool(valid),
            last_rebuild=rebuilt.finished_at.isoformat() if rebuilt and rebuilt.finished_at else None,
            last_rebuild_seconds=rebuilt.seconds if rebuilt else None,
            needs_rebuild=bloat is not None and bloat >= rebuild_bound() and size >= rebuild_min_bytes(),
        ))
    return report


def index_rebuild(*, name: str, trigger: Trigger) -> IndexRebuild | None:
    """``REINDEX INDEX CONCURRENTLY`` one watched index; returns its record, or None when another
    rebuild holds the lock (one at a time). A failure is recorded on the row (``error``), not raised.

    Precondition: not inside a transaction (PostgreSQL refuses a concurrent reindex there).
    """
    health = {h.name: h for h in index_health_report()}
    if name not in health:
        raise ValueError(f"{name!r} is not a watched search index (watched: {', '.join(sorted(health)) or 'none'})")
    if connection.in_atomic_block:
        raise RuntimeError("REINDEX INDEX CONCURRENTLY cannot run inside a transaction")
    before = health[name]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [_LOCK])
        if not cursor.fetchone()[0]:
            return None
        try:
            _drop_leftovers(cursor, name)
            record = IndexRebuild.objects.create(
                index_name=name, trigger=trigger, started_at=timezone.now(), size_before=before.size_bytes,
                live_rows=before.live_rows, bloat_before=before.bloat,
            )
            started = time.monotonic()
            try:
                # name is one of the watched indexes read from the catalog above, never caller text.
                cursor.execute(f"REINDEX INDEX CONCURRENTLY {connection.ops.quote_name(name)}")
            except DatabaseError as exc:
                record.error = str(exc)[:2000]
            else:
                cursor.execute("SELECT pg_relation_size(%s::regclass)", [name])
                record.size_after = int(cursor.fetchone()[0])
            record.finished_at = timezone.now()
            record.seconds = round(time.monotonic() - started, 3)
            record.save(update_fields=["error", "size_after", "finished_at", "seconds"])
            return record
        finally:
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [_LOCK])


def _drop_leftovers(cursor: Any, name: str) -> None:
    """Drop invalid copies an interrupted concurrent reindex left (``<name>_ccnew``, ``_ccnew1``, ...)."""
    cursor.execute(
        "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE NOT x.indisvalid AND i.relname ~ %s",
        [f"^{re.escape(name)}_ccnew[0-9]*$"],
    )
    for (leftover,) in cursor.fetchall():
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {connection.ops.quote_name(leftover)}")


def indexes_repair(*, trigger: Trigger = "schedule") -> dict[str, Any]:
    """Rebuild the most bloated index that needs it (at most one a run); returns the report and what was done."""
    report = index_health_report()
    due = sorted((h for h in report if h.needs_rebuild), key=lambda h: -(h.bloat or 0))
    rebuilt = index_rebuild(name=due[0].name, trigger=trigger) if due else None
    return {
        "bound": rebuild_bound(),
        "indexes": [h.as_json() for h in report],
        "rebuilt": None if rebuilt is None else {
            "index": rebuilt.index_name, "seconds": rebuilt.seconds, "size_before": rebuilt.size_before,
            "size_after": rebuilt.size_after, "error": rebuilt.error or None,
        },
        "skipped": "another rebuild is running" if due and rebuilt is None else None,
    }


def repair_schedule_ensure() -> None:
    """Create the repair ``Schedule`` unless it exists (migration 0011 creates it first)."""
    schedule_ensure(REPAIR_SCHEDULE_NAME, REPAIR_TASK, schedule_type=Schedule.MINUTES, minutes=REPAIR_SCHEDULE_MINUTES,
                    repeats=-1)
