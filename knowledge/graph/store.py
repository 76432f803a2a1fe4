"""Graph writes, inside the transactions that change chunks (DESIGN 3: mentions change exactly when their chunk does).

``GraphWriter`` is opened by the PostgreSQL backend in the chunk swap's transaction (an
ingestion's ``replace``, a ``delete``), in the indexer's batch transaction and in a rebuild.
``remove(chunk pks)`` takes chunks' mentions and relations out; ``index(chunk pks)`` extracts
and writes them for chunks that are (now) indexed; ``finish()`` settles what these changes
did to the tenant's gazetteer and deletes entities nothing mentions any more.

The gazetteer (the names the tenant's chunks define: titles and headings) is part of every
chunk's extraction, so when a transaction defines a new name or removes the last
definition of one, the other indexed chunks whose text contains that name are extracted
again in the same transaction (found through the full-text index). The graph therefore
always equals what ``rebuild`` computes from the indexed chunks.

Locking: the writer takes a per-tenant advisory lock, *after* every row lock its
transaction needs (chunks, term statistics), and then touches only graph tables; so a
writer holding it never waits for anyone, and graph writers of one tenant run one at a time.

Extraction is pure Python over text the transaction already holds, so it need not wait for
the lock: ``prepare_extraction`` reads the chunks and the gazetteer as they are and extracts
in a thread while the transaction's own database work (postings, the HNSW entries) runs;
``index(prepared=...)`` then uses that result when the gazetteer it was computed against is
still the tenant's under the lock, and extracts again otherwise. The graph written is the
same either way; only the wall-clock time differs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from knowledge.graph.extract import (
    DEFINING,
    EMPTY_GAZETTEER,
    EXTRACTOR_RANK,
    MAX_REFERENCE_TOKENS,
    ChunkGraph,
    Found,
    Gazetteer,
    extract,
    may_reference,
    own_names,
    referable,
)
from knowledge.graph.llm import LlmSpec, apply_triples
from knowledge.models import tenant_config_sql

# pg_advisory_xact_lock(GRAPH_LOCK, tenant id): one graph writer per tenant at a time.
GRAPH_LOCK = 0x47524150
# Chunks a rebuild reads and writes per round.
REBUILD_BATCH = 1000
# Entity types, least to most telling: an upsert keeps the better one.
_TYPE_PRIORITY_SQL = "(CASE {t} WHEN 'document' THEN 3 WHEN 'heading' THEN 2 WHEN 'name' THEN 0 WHEN 'acronym' THEN 0 ELSE 1 END)"

# Rows by primary key, the tenant checked on the rows found (``WHERE tenant_id = %s`` outside).
# Written as ``tenant_id = %s AND id = ANY(%s)``, the planner, whose statistics do not yet know
# a new tenant (or a table autovacuum has not analyzed since it grew), estimates one row for
# the tenant and scans all of the tenant's rows through its index, filtering them by key: every
# batch then read every chunk (or entity) the tenant has, and indexing a tenant took time
# quadratic in its size (on 20,000 chunks, a third of the graph's cost). OFFSET 0 keeps the
# subquery's key lookup from being merged into the outer query's plan.
_BY_KEY = "SELECT * FROM {table} WHERE id = ANY(%s) OFFSET 0"

_cache_lock = threading.Lock()
# (database alias, tenant id) -> (gazetteer version, matcher): building one costs ~1 ms per 500 names.
_gazetteers: OrderedDict[tuple[str, int], tuple[int, Gazetteer]] = OrderedDict()
_GAZETTEERS_KEPT = 16


# One chunk as extraction reads it: (chunk pk, document pk, text, title, content hash).
ChunkRow = tuple[int, int, str, str | None, str]


def _version(cursor: Any, tenant_id: int) -> int:
    cursor.execute("SELECT gazetteer_version FROM knowledge_graphstat WHERE tenant_id = %s", [tenant_id])
    row = cursor.fetchone()
    return int(row[0]) if row else 0


def _gazetteer(cursor: Any, tenant_id: int, using: str) -> tuple[int, Gazetteer]:
    """The tenant's defined names now, with the version they are of (cached by version)."""
    version = _version(cursor, tenant_id)
    key = (using, tenant_id)
    with _cache_lock:
        cached = _gazetteers.get(key)
        if cached is not None and cached[0] == version:
            _gazetteers.move_to_end(key)
            return cached
    cursor.execute(
        "SELECT normalized, name, type FROM knowledge_entity WHERE tenant_id = %s AND defined_count > 0 "
        "AND array_length(string_to_array(normalized, ' '), 1) <= %s",
        [tenant_id, MAX_REFERENCE_TOKENS],
    )
    gazetteer = Gazetteer({key: (name, kind) for key, name, kind in cursor.fetchall()})
    with _cache_lock:
        _gazetteers[key] = (version, gazetteer)
        _gazetteers.move_to_end(key)
        while len(_gazetteers) > _GAZETTEERS_KEPT:
            _gazetteers.popitem(last=False)
    return version, gazetteer


def _chunk_rows(cursor: Any, tenant_id: int, chunk_pks: Sequence[int]) -> list[ChunkRow]:
    cursor.execute(
        f"SELECT c.id, c.document_id, c.text, c.title, c.content_hash FROM ({_BY_KEY.format(table='knowledge_chunk')}) c "
        "WHERE c.tenant_id = %s ORDER BY c.id",
        [list(chunk_pks), tenant_id],
    )
    return cursor.fetchall()


@dataclass(frozen=True)
class _Extracted:
    """A batch's extraction: one graph per row, and the names the batch's chunks define."""

    graphs: list[ChunkGraph]
    defining: dict[str, tuple[str, str]]


def _extract_batch(
    rows: Sequence[ChunkRow], start: Gazetteer, earlier_new: Mapping[str, tuple[str, str]], undefined: Set[str],
) -> _Extracted:
    """Extract ``rows`` against the tenant's gazetteer ``start``, the names earlier batches of the
    transaction defined (``earlier_new``) and the batch's own; ``undefined``: names the transaction
    took the last definition of (references to them stop counting unless the batch defines them again).

    Pure: reads no database and no writer state, so it may run in another thread.
    """
    own = [own_names(title, text) for _, _, text, title, _ in rows]
    defining: dict[str, tuple[str, str]] = {}
    for names in own:
        for key, found in names.items():
            defining.setdefault(key, (found.name, found.type))
    lookup = {**earlier_new, **defining}
    extra = Gazetteer(lookup) if lookup else EMPTY_GAZETTEER
    excluded = {k for k in undefined if k not in defining}
    graphs = [extract(text, title=title, gazetteers=(start, extra), excluded=excluded, own=names)
              for (_, _, text, title, _), names in zip(rows, own, strict=True)]
    return _Extracted(graphs, defining)


@dataclass(frozen=True)
class PreparedExtraction:
    """Chunks read and being extracted, off the graph lock, against gazetteer ``version`` (``prepare_extraction``)."""

    tenant_id: int
    version: int
    rows: list[ChunkRow]
    result: Future[_Extracted]


def prepare_extraction(cursor: Any, tenant_id: int, chunk_pks: Sequence[int], *, using: str = "default") -> PreparedExtraction:
    """Read ``chunk_pks`` (the tenant's, which the transaction holds) and start their extraction in a thread.

    Call it before the transaction's other statements and pass the result to ``GraphWriter.index``:
    the extraction then overlaps with them. It takes no lock; the writer checks the gazetteer.
    """
    version, gazetteer = _gazetteer(cursor, int(tenant_id), using)
    rows = _chunk_rows(cursor, int(tenant_id), chunk_pks)
    # One thread per batch: the extraction holds the interpreter while the main thread waits for the
    # database (psycopg releases it then). shutdown(wait=False) lets the thread end with its task.
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graph-extract")
    try:
        future = executor.submit(_extract_batch, rows, gazetteer, {}, frozenset())
    finally:
        executor.shutdown(wait=False)
    return PreparedExtraction(int(tenant_id), version, rows, future)


@dataclass
class _Defined:
    """A name whose definition count this transaction changed: was it defined at the start, is it now."""

    before: bool
    now: bool
    name: str


class GraphWriter:
    """The graph side of one transaction for one tenant (see the module docstring).

    ``cursor`` is a cursor of the transaction (Django's wrapper); ``using`` its database alias
    (the gazetteer cache's key); ``llm``: the configured LLM extractor, whose cached answers
    are merged into every extraction (None: offline extraction only).
    """

    def __init__(self, cursor: Any, tenant_id: int, *, using: str = "default", llm: LlmSpec | None = None) -> None:
        self.cursor = cursor
        self.tenant_id = int(tenant_id)
        self.using = using
        self.llm = llm
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [GRAPH_LOCK, self.tenant_id])
        self.version, self.start = _gazetteer(cursor, self.tenant_id, using)
        self.defined: dict[str, _Defined] = {}
        self.new_names: dict[str, tuple[str, str]] = {}  # names this transaction's chunks define
        self.indexed: set[int] = set()
        # Entity ids this transaction's removals left with no mention (as its last statement on each
        # said): the only entities ``finish`` can have to delete, looked up by key, not the tenant's all.
        self.emptied: set[int] = set()

    # --- the gazetteer ----------------------------------------------------------------------

    def _note(self, key: str, name: str, before: int, now: int) -> None:
        known = self.defined.get(key)
        if known is None:
            self.defined[key] = _Defined(before > 0, now > 0, name)
        else:
            known.now = now > 0

    # --- writes -----------------------------------------------------------------------------

    def remove(self, chunk_pks: Sequence[int]) -> None:
        """Take these chunks' mentions and relations out (before or after the chunks themselves go)."""
        if not chunk_pks:
            return
        pks = list(chunk_pks)
        self.cursor.execute("DELETE FROM knowledge_relation WHERE tenant_id = %s AND chunk_id = ANY(%s)", [self.tenant_id, pks])
        self.cursor.execute(
            """
            WITH gone AS (
                DELETE FROM knowledge_mention WHERE tenant_id = %s AND chunk_id = ANY(%s) RETURNING entity_id, extractor
            ), counts AS (
                SELECT entity_id, count(*) AS n, count(*) FILTER (WHERE extractor = ANY(%s)) AS d FROM gone GROUP BY entity_id
            )
            UPDATE knowledge_entity e SET chunk_count = e.chunk_count - counts.n, defined_count = e.defined_count - counts.d
            FROM counts WHERE e.id = counts.entity_id
            RETURNING e.id, e.normalized, e.name, e.defined_count + counts.d, e.defined_count, e.chunk_count
            """,
            [self.tenant_id, pks, list(DEFINING)],
        )
        for entity_id, key, name, before, now, chunks in self.cursor.fetchall():
            if chunks <= 0:
                self.emptied.add(entity_id)
            else:
                self.emptied.discard(entity_id)
            if before != now:
                self._note(key, name, before, now)
        self.indexed.difference_update(pks)

    def index(self, chunk_pks: Sequence[int], *, prepared: PreparedExtraction | None = None) -> int:
        """Extract and write the graph of these chunks (the tenant's, holding no graph rows); returns mentions written.

        ``prepared``: ``prepare_extraction`` of the same chunks in this transaction; its result is
        used when nothing it depends on changed since (else the chunks are extracted again here).
        """
        if not chunk_pks:
            return 0
        undefined = {k for k, d in self.defined.items() if not d.now}
        extracted: _Extracted | None = None
        if (
            prepared is not None and prepared.tenant_id == self.tenant_id and prepared.version == self.version
            and not self.new_names and [row[0] for row in prepared.rows] == sorted(set(chunk_pks))
        ):
            rows, extracted = prepared.rows, prepared.result.result()
            # It excluded nothing: right when every name this transaction undefined is defined again
            # by the batch (a re-ingested document's own title, say).
            if not undefined <= extracted.defining.keys():
                extracted = None
        if extracted is None:
            rows = _chunk_rows(self.cursor, self.tenant_id, chunk_pks)
            extracted = _extract_batch(rows, self.start, self.new_names, undefined)
        self.new_names.update({k: v for k, v in extracted.defining.items() if k not in self.start})
        triples = self.llm.cached(self.cursor, self.tenant_id, [row[4] for row in rows]) if self.llm else {}
        graphs: list[tuple[int, int, ChunkGraph]] = []
        for (chunk_pk, document_pk, _, _, digest), graph in zip(rows, extracted.graphs, strict=True):
            if digest in triples:
                apply_triples(graph, triples[digest])
            graphs.append((chunk_pk, document_pk, graph))
        self.indexed.update(row[0] for row in rows)
        return self._write(graphs)

    def _write(self, graphs: Sequence[tuple[int, int, ChunkGraph]]) -> int:
        best: dict[str, Found] = {}
        counts: dict[str, list[int]] = {}
        for _, _, graph in graphs:
            for key, found in graph.mentions.items():
                if key not in best or _better(found, best[key]):
                    best[key] = found
                count = counts.setdefault(key, [0, 0])
                count[0] += 1
                count[1] += found.extractor in DEFINING
        if not best:
            return 0
        keys = sorted(best)  # upserts in key order: the same order in every writer
        priority = _TYPE_PRIORITY_SQL
        self.cursor.execute(
            f"""
            INSERT INTO knowledge_entity AS e (tenant_id, normalized, name, type, chunk_count, defined_count)
            SELECT %s, x.k, x.n, x.t, x.c, x.d FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::int[]) AS x(k, n, t, c, d)
            ORDER BY x.k
            ON CONFLICT (tenant_id, normalized) DO UPDATE SET
                chunk_count = e.chunk_count + EXCLUDED.chunk_count,
                defined_count = e.defined_count + EXCLUDED.defined_count,
                name = CASE WHEN {priority.format(t="EXCLUDED.type")} > {priority.format(t="e.type")} THEN EXCLUDED.name ELSE e.name END,
                type = CASE WHEN {priority.format(t="EXCLUDED.type")} > {priority.format(t="e.type")} THEN EXCLUDED.type ELSE e.type END
            RETURNING e.normalized, e.id, e.defined_count
            """,
            [self.tenant_id, keys, [best[k].name for k in keys], [best[k].type for k in keys],
             [counts[k][0] for k in keys], [counts[k][1] for k in keys]],
        )
        ids: dict[str, int] = {}
        for key, entity_id, now in self.cursor.fetchall():
            ids[key] = entity_id
            self.emptied.discard(entity_id)  # mentioned again: its count is above 0
            added = counts[key][1]
            if added:
                self._note(key, best[key].name, now - added, now)
        # Binary COPY: a batch writes thousands of rows, and COPY costs a fraction of INSERT ... unnest.
        raw = self.cursor.cursor  # the psycopg cursor under Django's wrapper
        mentions = 0
        with raw.copy("COPY knowledge_mention (tenant_id, chunk_id, entity_id, document_id, extractor, weight) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int8", "int8", "int8", "text", "float8"])
            for chunk_pk, document_pk, graph in graphs:
                for key, found in graph.mentions.items():
                    copy.write_row((self.tenant_id, chunk_pk, ids[key], document_pk, found.extractor, found.weight))
                    mentions += 1
        if any(graph.relations for _, _, graph in graphs):
            with raw.copy(
                "COPY knowledge_relation (tenant_id, chunk_id, subject_id, predicate, object_id, document_id, extractor, weight) "
                "FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["int8", "int8", "int8", "text", "int8", "int8", "text", "float8"])
                for chunk_pk, document_pk, graph in graphs:
                    for (subject, predicate, obj), weight in graph.relations.items():
                        copy.write_row((self.tenant_id, chunk_pk, ids[subject], predicate, ids[obj], document_pk,
                                        graph.relation_extractor(subject, predicate, obj), weight))
        return mentions

    def finish(self) -> None:
        """Settle the gazetteer: re-extract other chunks that name a newly defined or undefined
        name, bump the version if the set of names changed, drop entities nothing mentions."""
        # Only names the gazetteer holds matter to other chunks (and to the cached matchers).
        changed = {k: d for k, d in self.defined.items() if d.before != d.now and referable(k)}
        if changed:
            self.cursor.execute(
                "INSERT INTO knowledge_graphstat (tenant_id, gazetteer_version) VALUES (%s, 1) "
                "ON CONFLICT (tenant_id) DO UPDATE SET gazetteer_version = knowledge_graphstat.gazetteer_version + 1",
                [self.tenant_id],
            )
            affected = self._naming(changed, [pk for pk in self._chunks_naming(changed) if pk not in self.indexed])
            if affected:
                # Their own definitions do not change, so this settles without another round.
                self.remove(affected)
                self.index(affected)
            undefined = sorted(k for k, d in changed.items() if not d.now)
            if undefined:
                # No document or heading is about it any more: it is what its remaining mentions say.
                self.cursor.execute(
                    """
                    UPDATE knowledge_entity e SET type = coalesce((
                        SELECT CASE m.extractor WHEN 'name' THEN 'name' WHEN 'acronym' THEN 'acronym' ELSE 'entity' END
                        FROM knowledge_mention m WHERE m.tenant_id = e.tenant_id AND m.entity_id = e.id
                        ORDER BY m.extractor = 'name' DESC, m.extractor = 'acronym' DESC LIMIT 1), 'entity')
                    WHERE e.tenant_id = %s AND e.normalized = ANY(%s) AND e.type IN ('document', 'heading')
                    """,
                    [self.tenant_id, undefined],
                )
        if self.emptied:
            # The outer statement names only keys, so its plan is the primary key's (see _BY_KEY).
            self.cursor.execute(
                f"DELETE FROM knowledge_entity WHERE id = ANY(ARRAY(SELECT k.id FROM ({_BY_KEY.format(table='knowledge_entity')}) k "
                "WHERE k.tenant_id = %s)) AND chunk_count <= 0",
                [sorted(self.emptied), self.tenant_id],
            )
            self.emptied.clear()
        self.defined.clear()

    def _naming(self, names: Mapping[str, _Defined], chunk_pks: Sequence[int]) -> list[int]:
        """Those of ``chunk_pks`` whose text holds one of ``names`` as references are matched.

        The full-text index's candidates are a superset (any order, stemmed words); a chunk
        without any of the names extracts exactly as before, so re-extracting it (delete, extract,
        write back the same rows) would be work for nothing.
        """
        if not chunk_pks:
            return []
        lookup = Gazetteer({key: (d.name, "entity") for key, d in names.items()})
        self.cursor.execute(
            f"SELECT c.id, c.text FROM ({_BY_KEY.format(table='knowledge_chunk')}) c WHERE c.tenant_id = %s ORDER BY c.id",
            [list(chunk_pks), self.tenant_id],
        )
        return [pk for pk, text in self.cursor.fetchall() if may_reference(text, lookup)]

    def _chunks_naming(self, names: Mapping[str, _Defined]) -> list[int]:
        """Indexed chunks whose text may contain one of ``names`` (a superset: extraction decides).

        The full-text index finds them by each name's words, as normalized and as written; a
        text spelling a name with accents that neither form has is missed until ``rebuild``.
        """
        forms = sorted({form for key, d in names.items() for form in (key, d.name) if form})
        # One index scan for all of them: the names' word sets OR-ed into one tsquery.
        self.cursor.execute(
            f"""
            WITH q AS (
                SELECT string_agg('(' || x.q::text || ')', ' | ')::tsquery AS q
                FROM (SELECT DISTINCT plainto_tsquery({tenant_config_sql("%s")}, quarry_search_text(f)) AS q FROM unnest(%s::text[]) AS f) x
                WHERE numnode(x.q) > 0
            )
            SELECT c.id FROM q JOIN knowledge_chunk c ON c.tenant_id = %s AND c.indexed AND c.search_vector @@ q.q
            ORDER BY c.id
            """,
            [self.tenant_id, forms, self.tenant_id],
        )
        return [row[0] for row in self.cursor.fetchall()]

    # --- rebuild ----------------------------------------------------------------------------

    def rebuild(self, *, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Recompute the tenant's whole graph from its indexed chunks; returns how many chunks were read.

        ``on_progress(done, total)`` after every batch.
        """
        cursor = self.cursor
        for table in ("knowledge_relation", "knowledge_mention", "knowledge_entity"):
            cursor.execute(f"DELETE FROM {table} WHERE tenant_id = %s", [self.tenant_id])
        cursor.execute(
            "INSERT INTO knowledge_graphstat (tenant_id, gazetteer_version) VALUES (%s, 1) "
            "ON CONFLICT (tenant_id) DO UPDATE SET gazetteer_version = knowledge_graphstat.gazetteer_version + 1",
            [self.tenant_id],
        )
        cursor.execute("SELECT count(*) FROM knowledge_chunk WHERE tenant_id = %s AND indexed", [self.tenant_id])
        total = int(cursor.fetchone()[0])
        # First every definition (titles are on the chunk rows; headings need the text), then the extraction.
        names: dict[str, tuple[str, str]] = {}
        for batch in self._indexed_batches(columns="c.title, c.text"):
            for title, text in batch:
                for key, found in own_names(title, text).items():
                    names.setdefault(key, (found.name, found.type))
        self.start = Gazetteer(names)
        self.version = -1  # the start of no stored version: no prepared extraction is taken for it
        self.defined.clear()
        self.new_names.clear()
        done = 0
        for batch in self._indexed_batches(columns="c.id"):
            pks = [row[0] for row in batch]
            self.index(pks)
            done += len(pks)
            if on_progress is not None:
                on_progress(done, total)
        self.defined.clear()  # nothing to settle: every chunk was extracted with every name
        self.finish()
        return done

    def _indexed_batches(self, *, columns: str) -> Iterable[list[tuple[Any, ...]]]:
        last = 0
        while True:
            self.cursor.execute(
                f"SELECT c.id, {columns} FROM knowledge_chunk c WHERE c.tenant_id = %s AND c.indexed AND c.id > %s "
                f"ORDER BY c.id LIMIT %s",
                [self.tenant_id, last, REBUILD_BATCH],
            )
            rows = self.cursor.fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield [row[1:] for row in rows]


def _better(found: Found, known: Found) -> bool:
    """The name and type an entity gets from a batch: the best-ranked find, then the first name in order."""
    a, b = EXTRACTOR_RANK[found.extractor], EXTRACTOR_RANK[known.extractor]
    return a > b or (a == b and found.name < known.name)
