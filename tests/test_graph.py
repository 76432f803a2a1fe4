"""The knowledge graph: extraction on small texts, its consistency with the chunks it describes
(replacement, deletion, the backlog, concurrent re-ingestion: always equal to a rebuild),
tenant isolation, and the graph leg of hybrid search (PostgreSQL, with and without pgvector)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import connection, connections, transaction

from accounts.models import Tenant
from knowledge import rag
from knowledge.graph.extract import Gazetteer, extract, may_reference, normalize, own_names
from knowledge.graph.search import GraphParams, fuse, query_names
from knowledge.graph.store import GraphWriter, prepare_extraction
from knowledge.rag.graph_types import GraphCandidate
from knowledge.models import Chunk, Entity, Mention, Relation
from knowledge.rag import RAGDocument
from knowledge.rag.backends.postgres import PostgresBackend, maintenance
from tests.conftest import STOCK_AVAILABLE
from tests.embedders import BagOfWordsEmbedder
from tests.factories import make_tenant

needs_stock = pytest.mark.skipif(not STOCK_AVAILABLE, reason="no PostgreSQL at 127.0.0.1:5432 (this machine kind provides one)")
DATABASES = ["default", pytest.param("stock", marks=needs_stock)]


def gazetteer(*titles: str) -> Gazetteer:
    names = {}
    for title in titles:
        for key, found in own_names(title, "").items():
            names[key] = (found.name, found.type)
    return Gazetteer(names)


def mentioned(text: str, *, title: str | None = None, titles: tuple[str, ...] = ()) -> dict[str, str]:
    """key -> extractor of what ``text`` mentions."""
    return {k: f.extractor for k, f in extract(text, title=title, gazetteers=[gazetteer(*titles)]).mentions.items()}


# --- extraction on small texts ----------------------------------------------------------------


def test_other_documents_titles_are_found_and_the_own_title_defines_the_chunk() -> None:
    found = mentioned('"Hello Love" was a 1974 single by Hank Snow.', title="Hello Love (song)", titles=("Hank Snow", "Hello Love (song)"))
    assert found == {"hello love": "title", "hank snow": "reference"}
    assert normalize("Hello Love (song)") == normalize("hello love") == "hello love"
    assert normalize("The Beatles") == "beatles" and normalize("The") == "" and normalize("of the") == ""


def test_a_one_word_title_counts_only_where_it_is_written_as_a_name() -> None:
    assert mentioned("Green was released in 1978.", titles=("Green",)) == {"green": "reference"}
    assert mentioned("The grass is green in May.", titles=("Green",)) == {}


def test_capitalized_names_and_acronyms() -> None:
    found = mentioned("In 1920 the University of Oxford hired Miles Davis and John Coltrane. NASA and the U.S. Army helped in World War II.")
    assert found == {
        "university of oxford": "name", "miles davis": "name", "john coltrane": "name", "nasa": "acronym",
        "u s": "acronym", "world war ii": "name",
    }
    assert "ii" not in found and "in" not in found  # numerals and sentence-initial words name nothing


def test_a_heading_defines_a_name_that_other_chunks_reference() -> None:
    assert own_names(None, "# Safety Rules\nWear a helmet.")["safety rules"].extractor == "heading"
    assert mentioned("Read the Safety Rules first.", titles=()) == {"safety rules": "name"}
    graph = extract("Read the safety rules first.", title=None, gazetteers=[Gazetteer({"safety rules": ("Safety Rules", "heading")})])
    assert graph.mentions["safety rules"].extractor == "reference"


def test_relations_co_occurrence_within_a_sentence_and_abbreviations() -> None:
    graph = extract("Miles Davis met John Coltrane. Later Bill Evans joined. The National Aeronautics Agency (NAA) flew.", title=None)
    assert ("john coltrane", "co-occurs with", "miles davis") in graph.relations
    assert not any("bill evans" in key for key in graph.relations if "miles davis" in key)  # another sentence
    assert graph.relations[("naa", "abbreviation of", "national aeronautics agency")] == 1.0
    assert graph.relation_extractor("naa", "abbreviation of", "national aeronautics agency") == "pattern"


def test_query_names_are_its_word_ngrams_capitalized_where_one_word() -> None:
    keys = {key for key, _, _ in query_names("Who performed Hello Love in Tennessee?")}
    assert {"hello love", "tennessee", "hello", "love"} <= keys and "who" not in keys and "performed" not in keys
    assert "performed" in {key for key, _, _ in query_names("who performed hello love")}  # no capitals at all: any word


def test_may_reference_is_false_only_where_no_name_of_the_gazetteer_occurs() -> None:
    names = gazetteer("Hank Snow", "Tennessee")
    assert may_reference("He moved to Nashville, Tennessee, in 1949.", names)
    assert may_reference("HANK  snow\nrecorded there.", names)  # as references match: case, spacing
    assert not may_reference("Snow fell on Hank's farm in Nashville.", names)  # the words, not the name
    assert not may_reference("Tennessee", gazetteer())


def test_fusion_places_the_graphs_best_after_hybrids_first_hits_and_keeps_hybrids_order() -> None:
    hybrid = [(f"h{i}", 1 / (61 + i)) for i in range(8)]
    graph = [GraphCandidate("g1", 0.05, ("A",)), GraphCandidate("h6", 0.03, ("B",)), GraphCandidate("g2", 0.04, ("C",))]
    params = GraphParams(admit=2, insert_after=3, agreement=3.0)
    fused = fuse(hybrid, graph, params)
    # h6 is reached by both: 0.03 + 3 * 1/67 beats g2's 0.04; g2 is not admitted, h6 moves up.
    assert [cid for cid, _, _ in fused] == ["h0", "h1", "h2", "h6", "g1", "h3", "h4", "h5", "h7"]
    scores = [score for _, score, _ in fused]
    assert scores == sorted(scores, reverse=True) and fused[3][1] == fused[5][1] == hybrid[3][1]
    assert {cid for cid, _, found in fused if found is not None} == {"h6", "g1"}
    # Without agreement the graph's own order decides; with nothing to place, hybrid stays as it was.
    assert [cid for cid, _, c in fuse(hybrid, graph, GraphParams(admit=2, insert_after=3, agreement=0.0)) if c] == ["g1", "g2"]
    assert [cid for cid, _, _ in fuse(hybrid, [], params)] == [cid for cid, _ in hybrid]
    assert [cid for cid, _, _ in fuse([], graph, params)] == ["g1", "g2"]  # no hybrid list: no agreement either


def test_fusion_on_a_score_fused_list_keeps_its_scores_and_agrees_by_rrf() -> None:
    # A score-fused page (scores 0..2.5) whose RRF scores differ from its order: h6 has the best RRF score.
    hybrid = [(f"h{i}", 2.0 - i / 10) for i in range(8)]
    rrf = {f"h{i}": 1 / (70 - i) for i in range(8)}
    graph = [GraphCandidate("g1", 0.05, ("A",)), GraphCandidate("h6", 0.03, ("B",)), GraphCandidate("g2", 0.04, ("C",))]
    fused = fuse(hybrid, graph, GraphParams(admit=2, insert_after=3, agreement=3.0), rrf_scores=rrf)
    assert [cid for cid, _, _ in fused] == ["h0", "h1", "h2", "h6", "g1", "h3", "h4", "h5", "h7"]
    assert [s for _, s, _ in fused] == [2.0, 1.9, 1.8, 1.7, 1.7, 1.7, 1.6, 1.5, 1.3]  # the page's own scale
    # Agreement reads the RRF scores, not the page's: 0.03 + 3 * 1/64 beats 0.04 + 0, not 0.03 + 3 * 1.4.
    low = {**rrf, "h6": 0.0}
    assert [cid for cid, _, c in fuse(hybrid, graph, GraphParams(admit=2, insert_after=3, agreement=3.0), rrf_scores=low) if c] == ["g1", "g2"]


# --- consistency: the graph equals a rebuild ----------------------------------------------------

# Titles that name each other, so references cross documents in every direction.
ARTICLES = {
    "hello": ("Hello Love (song)", '"Hello Love" is a 1974 single by Hank Snow on RCA Victor.'),
    "snow": ("Hank Snow", "Hank Snow moved to Nashville, Tennessee, in 1949. He recorded for RCA Victor."),
    "tn": ("Tennessee", "Tennessee borders North Carolina. Nashville is its capital; Hank Snow lived there."),
    "nc": ("North Carolina", "North Carolina lies east of Tennessee. Publix has stores there."),
    "publix": ("Publix", "Publix Super Markets is based in Lakeland, Florida. It has stores in North Carolina."),
}


# The graph leg as small corpora need it: one seed, only it protected and ahead of the graph, every candidate counts.
LOOSE = {"seeds": 1, "protect": 1, "min_activation": 0.0, "insert_after": 1, "admit": 5}


def doc(key: str, text: str | None = None, title: str | None = None) -> RAGDocument:
    default_title, default_text = ARTICLES[key]
    return RAGDocument(key, text or default_text, title=title if title is not None else default_title, metadata={"group": key})


def service(using: str = "default", namespace: str = "acme", **options: Any) -> rag.RAGService:
    return rag.service(PostgresBackend(using, **options), BagOfWordsEmbedder(), namespace=namespace)  # type: ignore[arg-type]


def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return async_to_sync(fn)(*args, **kwargs)


def snapshot(using: str, tenant: Tenant) -> dict[str, object]:
    """The graph as sets of values that do not depend on row ids or the order things happened in."""
    entities = {e.normalized: (e.chunk_count, e.defined_count) for e in Entity.objects.using(using).filter(tenant=tenant)}
    chunk_ids = dict(Chunk.objects.using(using).filter(tenant=tenant).values_list("id", "chunk_id"))
    names = dict(Entity.objects.using(using).filter(tenant=tenant).values_list("id", "normalized"))
    mentions = {(chunk_ids.get(m.chunk_id), names.get(m.entity_id), m.extractor, round(m.weight, 6))
                for m in Mention.objects.using(using).filter(tenant=tenant)}
    relations = {(chunk_ids.get(r.chunk_id), names.get(r.subject_id), r.predicate, names.get(r.object_id), r.extractor, round(r.weight, 6))
                 for r in Relation.objects.using(using).filter(tenant=tenant)}
    return {"entities": entities, "mentions": mentions, "relations": relations}


def assert_equals_rebuild(using: str, tenant: Tenant) -> dict[str, object]:
    before = snapshot(using, tenant)
    assert all(None not in m[:2] for m in before["mentions"]), "a mention names a chunk (or entity) that is gone"  # type: ignore[attr-defined]
    assert all(None not in (r[0], r[1], r[3]) for r in before["relations"]), "a relation names a chunk that is gone"  # type: ignore[attr-defined]
    assert all(count > 0 for count, _ in before["entities"].values()), "an entity nothing mentions is left"  # type: ignore[attr-defined]
    maintenance.rebuild_graph(PostgresBackend(using), tenant.slug)
    assert snapshot(using, tenant) == before
    return before


@pytest.mark.parametrize("using", DATABASES)
@pytest.mark.django_db(databases=["default", "stock"])
def test_references_follow_titles_as_documents_arrive_change_and_go(using: str) -> None:
    tenant = Tenant.objects.db_manager(using).create(slug="acme")
    svc = service(using)
    run(svc.ingest, [doc("hello"), doc("tn")])
    graph = assert_equals_rebuild(using, tenant)
    assert ("hello:0", "hank snow", "name", 0.5) in graph["mentions"]  # type: ignore[operator]
    run(svc.ingest, [doc("snow")])  # defines "Hank Snow": the other chunks now reference it
    graph = assert_equals_rebuild(using, tenant)
    assert ("hello:0", "hank snow", "reference", 0.8) in graph["mentions"]  # type: ignore[operator]
    assert ("tn:0", "hank snow", "reference", 0.8) in graph["mentions"]  # type: ignore[operator]
    run(svc.ingest, [doc("snow", title="Clarence Snow")])  # retitled: nothing defines "Hank Snow" any more
    graph = assert_equals_rebuild(using, tenant)
    assert ("hello:0", "hank snow", "name", 0.5) in graph["mentions"]  # type: ignore[operator]
    assert graph["entities"]["clarence snow"] == (1, 1)  # type: ignore[index]
    run(svc.ingest, [doc("nc"), doc("publix")])
    run(svc.delete, ["tn", "snow"])
    graph = assert_equals_rebuild(using, tenant)
    assert "clarence snow" not in graph["entities"]  # type: ignore[operator]
    assert not any(m[0] in ("tn:0", "snow:0") for m in graph["mentions"])  # type: ignore[attr-defined]
    assert ("nc:0", "tennessee", "reference", 0.8) not in graph["mentions"]  # type: ignore[operator]
    # Re-ingesting the same text changes nothing.
    run(svc.ingest, [doc("nc")])
    assert snapshot(using, tenant) == graph


@pytest.mark.parametrize("using", DATABASES)
@pytest.mark.django_db(databases=["default", "stock"])
def test_the_backlog_gets_its_graph_when_indexed(using: str) -> None:
    tenant = Tenant.objects.db_manager(using).create(slug="acme")
    run(service(using).ingest, [doc("snow")])
    deferred = service(using, inline_index_max_chunks=0)
    run(deferred.ingest, [doc("hello"), doc("tn")])
    graph = snapshot(using, tenant)
    assert not any(m[0] in ("hello:0", "tn:0") for m in graph["mentions"])  # type: ignore[attr-defined]
    backend = PostgresBackend(using)
    while maintenance.index_backlog(backend, "acme", limit=1):
        pass
    graph = assert_equals_rebuild(using, tenant)
    assert ("hello:0", "hank snow", "reference", 0.8) in graph["mentions"]  # type: ignore[operator]
    assert ("snow:0", "tennessee", "reference", 0.8) in graph["mentions"]  # type: ignore[operator]


@pytest.mark.django_db
def test_an_extraction_prepared_before_a_name_was_defined_is_done_again_under_the_lock() -> None:
    tenant = make_tenant("acme")
    run(service(inline_index_max_chunks=0).ingest, [doc("hello")])  # names Hank Snow, who has no document yet
    hello = list(Chunk.objects.filter(tenant=tenant).values_list("id", flat=True))
    with transaction.atomic(), connection.cursor() as cursor:
        prepared = prepare_extraction(cursor, tenant.pk, hello)
        assert prepared.result.result().graphs[0].mentions["hank snow"].extractor == "name"
        run(service().ingest, [doc("snow")])  # meanwhile "Hank Snow" gets its document: the gazetteer changes
        cursor.execute("UPDATE knowledge_chunk SET indexed = true WHERE id = ANY(%s)", [hello])
        writer = GraphWriter(cursor, tenant.pk)
        assert writer.version != prepared.version
        writer.index(hello, prepared=prepared)
        writer.finish()
    graph = assert_equals_rebuild("default", tenant)
    assert ("hello:0", "hank snow", "reference", 0.8) in graph["mentions"]  # type: ignore[operator]


@pytest.mark.django_db(transaction=True)
def test_concurrent_reingestion_and_indexing_leave_the_graph_equal_to_a_rebuild() -> None:
    tenant = make_tenant("acme")
    run(service().ingest, [doc(key) for key in ARTICLES])
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            svc = service(inline_index_max_chunks=0 if n % 3 == 0 else 500)
            key = list(ARTICLES)[1 + n % (len(ARTICLES) - 1)]  # never "hello", which is re-ingested beside it
            title = ARTICLES[key][0] if n % 2 else f"{ARTICLES[key][0]} Revisited"
            run(svc.ingest, [doc(key, title=title), doc("hello", text=f"Hello Love, take {n}, by Hank Snow in Tennessee.")])
            if n % 4 == 1:
                run(svc.delete, ["publix"])
            maintenance.index_backlog(PostgresBackend(), "acme", limit=2)
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    backend = PostgresBackend()
    while maintenance.index_backlog(backend, "acme"):
        pass
    assert_equals_rebuild("default", tenant)


# --- tenant isolation ------------------------------------------------------------------------


@pytest.mark.django_db
def test_entities_mentions_relations_and_graph_reads_stay_in_their_tenant() -> None:
    acme, globex = make_tenant("acme"), make_tenant("globex")
    run(service(namespace="acme").ingest, [doc(key) for key in ("hello", "snow", "tn")])
    run(service(namespace="globex").ingest, [doc("snow", text="Hank Snow is Globex's secret code name for Project Tundra.")])
    for model in (Entity, Mention, Relation):
        assert model.objects.filter(tenant=acme).exists() and model.objects.filter(tenant=globex).exists()
    globex_chunks = set(Chunk.objects.filter(tenant=globex).values_list("id", flat=True))
    assert not Mention.objects.filter(tenant=acme, chunk_id__in=globex_chunks).exists()
    assert not Relation.objects.filter(tenant=acme, chunk_id__in=globex_chunks).exists()
    acme_entities = set(Entity.objects.filter(tenant=acme).values_list("id", flat=True))
    assert not Mention.objects.filter(tenant=globex, entity_id__in=acme_entities).exists()
    # Same key, two entities: counts are per tenant.
    assert Entity.objects.get(tenant=acme, normalized="hank snow").chunk_count == 3
    assert Entity.objects.get(tenant=globex, normalized="hank snow").chunk_count == 1

    svc = service(namespace="globex", graph=LOOSE)
    result = run(svc.graph_search, "Where did Hank Snow live, Tennessee?", limit=10)
    assert {h.chunk.document_id for h in result.hits} == {"snow"} and all(h.chunk.namespace == "globex" for h in result.hits)
    triplets = run(svc.graph_triplets, "Hank Snow Tennessee RCA Victor", limit=10)
    assert {t.chunk_id for t in triplets} <= {"snow:0"} and not any("Tennessee" in t.object.name for t in triplets)
    around = run(svc.graph_neighbors, "Hank Snow", limit=10)
    assert around.chunk_ids == ("snow:0",) and {n.entity.name for n in around.neighbors} <= {"Project Tundra", "Globex"}
    assert run(svc.graph_neighbors, "Tennessee", limit=10).entity is None
    picture = run(svc.graph_picture, ["hello:0", "snow:0"], expand=True)
    assert [p[0] for p in picture.passages] == ["snow:0"]  # acme's hello:0 does not exist for globex


@pytest.mark.django_db
def test_a_hub_entitys_strongest_relations_are_read_whatever_order_the_rows_were_written_in() -> None:
    """Triplet search and neighbours read a bounded number of an entity's relations from each end
    (200 and 2,000): the strongest, not whichever rows the server happens to scan first."""
    acme = make_tenant("acme")
    yukon = RAGDocument("yukon", "Hank Snow toured the Yukon Territory with his band.", title="Tours")
    run(service().ingest, [doc("hello"), doc("snow"), yukon])
    hank = Entity.objects.get(tenant=acme, normalized="hank snow")
    stated = [*Relation.objects.filter(tenant=acme, subject=hank), *Relation.objects.filter(tenant=acme, object=hank)]
    assert any("Yukon Territory" in (r.subject.name, r.object.name) for r in stated)
    snow = Chunk.objects.get(tenant=acme, chunk_id="snow:0")
    # 2,100 faint relations at each end, written before the stated ones, and no index in weight
    # order: a scan of the table meets the faint ones first.
    fillers = Entity.objects.bulk_create(
        [Entity(tenant=acme, normalized=f"filler {n}", name=f"Filler {n}", type="name", chunk_count=1) for n in range(2100)])
    Relation.objects.filter(tenant=acme, subject=hank).delete()
    Relation.objects.filter(tenant=acme, object=hank).delete()
    faint = {"tenant": acme, "chunk": snow, "document_id": snow.document_id, "predicate": "related_to",
             "extractor": "sentence", "weight": 0.001}
    Relation.objects.bulk_create([Relation(subject=hank, object=e, **faint) for e in fillers] +
                                 [Relation(subject=e, object=hank, **faint) for e in fillers])
    Relation.objects.bulk_create(stated)  # written again, after the faint ones
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX relation_subject_weight, relation_object_weight")  # rolled back with the test

    # One seed (hello:0, not the tour): the Yukon Territory is reached only through Hank Snow's relations.
    triplets = run(service(graph={"seeds": 1}).graph_triplets, "Hello Love by Hank Snow on RCA Victor", limit=30)
    assert "Yukon Territory" in {n for t in triplets for n in (t.subject.name, t.object.name)}
    around = run(service().graph_neighbors, "Hank Snow", limit=30)
    assert "Yukon Territory" in {n.entity.name for n in around.neighbors}
    assert not any(n.entity.name.startswith("Filler") for n in around.neighbors[:3])


# --- the graph leg -------------------------------------------------------------------------------


def filler(n: int) -> RAGDocument:
    return RAGDocument(f"filler-{n}", f"Note {n} about gravel, sand and crushed stone for road building.", title=f"Gravel note {n}",
                       metadata={"group": "filler"})


@pytest.mark.parametrize("using", DATABASES)
@pytest.mark.django_db(databases=["default", "stock"])
def test_the_graph_leg_reaches_the_passage_a_top_hit_names_and_says_through_what(using: str) -> None:
    Tenant.objects.db_manager(using).create(slug="acme")
    svc = service(using, graph=LOOSE)
    run(svc.ingest, [doc(key) for key in ARTICLES] + [filler(n) for n in range(12)])
    question = "What was the hometown of the singer of Hello Love?"  # the second hop shares no word with it
    assert all(h.graph_path is None and h.graph_score is None for h in run(svc.search, question, limit=3))
    result = run(svc.graph_search, question, limit=3)
    by_id = {h.chunk.chunk_id: h for h in result.hits}
    assert result.hits[0].chunk.chunk_id == "hello:0" and result.hits[0].graph_path is None  # the seed stays first
    assert by_id["snow:0"].graph_path == ("Hank Snow",) and by_id["snow:0"].graph_score > 0
    assert by_id["snow:0"].rrf_rank == 2 and result.leg.candidates[0].chunk_id == "snow:0"
    assert [n.name for n in result.leg.named] == ["Hello Love"]
    assert {"Hank Snow"} <= {n.name for n in result.leg.nodes}
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)
    # The same with search(graph=True); and a metadata filter applies to the graph leg too.
    assert [h.chunk.chunk_id for h in run(svc.search, question, limit=3, graph=True)] == [h.chunk.chunk_id for h in result.hits]
    filtered = run(svc.graph_search, question, limit=5, filters={"group": ("hello", "tn", "nc")})
    assert {h.chunk.document_id for h in filtered.hits} <= {"hello", "tn", "nc"}
    # On a score-fused hybrid list the graph places the same passage; every other hit keeps its place,
    # fused score, parts and RRF rank from plain score-fused search.
    scored = run(svc.graph_search, question, limit=3, fusion="score")
    plain = run(svc.search, question, limit=10, fusion="score")
    assert {h.chunk.chunk_id: h for h in scored.hits}["snow:0"].graph_path == ("Hank Snow",)
    placed = {h.chunk.chunk_id for h in scored.hits if h.graph_path}
    rest = [(h.chunk.chunk_id, h.score, h.rrf_rank, h.keyword_norm) for h in scored.hits if h.graph_path is None]
    assert rest == [(h.chunk.chunk_id, h.score, h.rrf_rank, h.keyword_norm) for h in plain if h.chunk.chunk_id not in placed][: len(rest)]
    assert all(h.keyword_norm is not None and h.semantic_norm is not None for h in scored.hits)
    assert [h.score for h in scored.hits] == sorted((h.score for h in scored.hits), reverse=True)


@pytest.mark.django_db
def test_entities_in_too_many_chunks_are_pruned_from_expansion() -> None:
    make_tenant("acme")
    svc = service(graph={**LOOSE, "min_pruned": 3, "max_share": 0.2})
    everywhere = [RAGDocument(f"memo-{n}", f"Memo {n}: Acme Corp ships gravel on Monday.", title=f"Memo {n}") for n in range(10)]
    run(svc.ingest, [*everywhere, doc("hello"), doc("snow"), RAGDocument("acme", "Acme Corp sells gravel.", title="Acme Corp")])
    result = run(svc.graph_search, "Hello Love by Acme Corp", limit=10)
    assert all("Acme Corp" not in (h.graph_path or ()) for h in result.hits)
    assert "Acme Corp" not in {n.name for n in result.leg.nodes}
    assert any(h.graph_path and h.chunk.chunk_id == "snow:0" for h in result.hits)  # other entities still lead on


@pytest.mark.django_db
def test_graph_search_without_a_graph_or_an_embedder() -> None:
    make_tenant("acme")
    run(service().ingest, [RAGDocument("plain", "just lower case words here")])
    result = run(service().graph_search, "words", limit=5)
    assert result.leg.entities == 0 and [h.chunk.chunk_id for h in result.hits] == ["plain:0"]
    with pytest.raises(rag.ConfigurationError, match="needs an embedder"):
        run(rag.postgres(None, namespace="acme").graph_search, "words")
    with pytest.raises(rag.ConfigurationError, match="knowledge graph"):
        run(rag.memory(BagOfWordsEmbedder(), namespace="acme").graph_search, "words")
    with pytest.raises(rag.RAGValidationError, match="graph_search"):
        run(service().search, "words", mode="keyword", graph=True)


@pytest.mark.django_db
def test_without_the_graph_settings_chunks_get_no_graph_and_services_no_graph_search(settings: Any) -> None:
    """The graph reaches knowledge.rag only through its two settings (QUARRY_CHUNK_INDEX_HOOK, QUARRY_GRAPH_READS)."""
    tenant = make_tenant("acme")
    settings.QUARRY_CHUNK_INDEX_HOOK = None
    settings.QUARRY_GRAPH_READS = None
    svc = service()
    assert svc.backend.index_hook is None and not svc.has_graph  # type: ignore[attr-defined]
    run(svc.ingest, [doc("hello"), doc("snow")])
    assert not Mention.objects.filter(tenant=tenant).exists() and not Entity.objects.filter(tenant=tenant).exists()
    assert maintenance.rebuild_graph(svc.backend, "acme") == 0  # type: ignore[arg-type]
    with pytest.raises(rag.ConfigurationError, match="knowledge graph"):
        run(svc.graph_search, "Hank Snow")
    # A class that takes the database alias but is no ChunkIndexHook: refused when the backend is built.
    settings.QUARRY_CHUNK_INDEX_HOOK = {"CLASS": "knowledge.rag.backends.postgres.PostgresBackend", "OPTIONS": {"index_hook": None}}
    with pytest.raises(rag.ConfigurationError, match="is not a ChunkIndexHook"):
        PostgresBackend()


@pytest.mark.django_db
def test_rebuild_graph_command_reports_what_it_rebuilt(capsys: pytest.CaptureFixture[str]) -> None:
    make_tenant("acme")
    run(service().ingest, [doc("hello"), doc("snow")])
    Mention.objects.filter(tenant__slug="acme").delete()  # damage: the command repairs it
    call_command("rebuild_graph", "--tenant", "acme", "--quiet")
    out = capsys.readouterr().out
    assert "rebuilt the graph of tenant acme: 2 chunks" in out
    assert Mention.objects.filter(tenant__slug="acme", chunk__chunk_id="hello:0", entity__normalized="hank snow").exists()
    with pytest.raises(Exception, match="does not exist"):
        call_command("rebuild_graph", "--tenant", "nobody", "--quiet")


@pytest.mark.django_db
def test_graph_writes_roll_back_with_the_chunks() -> None:
    tenant = make_tenant("acme")
    run(service().ingest, [doc("snow")])
    before = snapshot("default", tenant)

    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        run(service().ingest, [doc("hello"), doc("snow", title="Someone Else")])
        raise Boom
    assert snapshot("default", tenant) == before
    assert connections["default"].in_atomic_block  # the test's own transaction is intact
