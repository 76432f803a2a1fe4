"""Keyword search across languages and scripts: accents, CJK bigrams, a text search language per
tenant and its background re-index. On the embedded server and on the stock PostgreSQL 15."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

import pytest
from asgiref.sync import async_to_sync
from django.db import connections

from accounts.models import Tenant
from knowledge import rag
from knowledge.models import Chunk, CorpusStat, Posting, SearchLanguage, TermStat
from knowledge.rag.backends.postgres import PostgresBackend, maintenance
from knowledge.services import text_search
from tests.conftest import STOCK_AVAILABLE
from tests.embedders import BagOfWordsEmbedder

needs_stock = pytest.mark.skipif(not STOCK_AVAILABLE, reason="no PostgreSQL at 127.0.0.1:5432 (this machine kind provides one)")
DATABASES = ["default", pytest.param("stock", marks=needs_stock)]
pytestmark = pytest.mark.django_db(databases=["default", "stock"] if STOCK_AVAILABLE else ["default"])
MIGRATION = importlib.import_module("knowledge.migrations.0013_text_search_languages")

FRENCH = [
    rag.RAGDocument("cafe", "Le café de la gare sert un crème brûlée délicieuse.", title="Café de la gare"),
    rag.RAGDocument("chevaux", "Les chevaux galopent dans les prés de Normandie.", title="Élevage"),
]
GERMAN = [
    rag.RAGDocument("haeuser", "Die alten Häuser der Altstadt wurden renoviert.", title="Stadtbild"),
    rag.RAGDocument("strasse", "Die Straße ist wegen Bauarbeiten gesperrt.", title="Verkehr"),
]
JAPANESE = [
    rag.RAGDocument("mame", "私は毎朝コーヒー豆を挽いてから会社に出かけます。", title="朝の習慣"),
    rag.RAGDocument("ocha", "京都では抹茶と和菓子を楽しみました。", title="旅行"),
]
CHINESE = [
    rag.RAGDocument("kafei", "我们每天早上喝咖啡，这些咖啡豆来自云南。", title="早餐"),
    rag.RAGDocument("cha", "杭州的龙井茶非常有名。", title="茶叶"),
]


def _service(using: str, namespace: str) -> rag.RAGService:
    Tenant.objects.using(using).get_or_create(slug=namespace, defaults={"name": namespace})
    return rag.postgres(BagOfWordsEmbedder(), None, namespace=namespace, using=using)


def keyword(service: rag.RAGService, text: str) -> list[str]:
    return [h.chunk.document_id for h in async_to_sync(service.search)(text, mode="keyword", limit=10)]


@pytest.fixture(params=DATABASES)
def using(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make(using: str) -> Callable[..., rag.RAGService]:
    """``make(namespace, documents, language=None)``: a tenant in ``language`` holding ``documents``."""

    def build(namespace: str, documents: list[rag.RAGDocument], language: str | None = None) -> rag.RAGService:
        service = _service(using, namespace)
        if language is not None:
            maintenance.apply_search_language(PostgresBackend(using), namespace, language)
        async_to_sync(service.ingest)(documents)
        return service

    return build


# --- accents -------------------------------------------------------------------------------------


def test_server_has_unaccent_and_configurations_use_it(using: str) -> None:
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT extname FROM pg_extension WHERE extname = 'unaccent'")
        assert cursor.fetchone() is not None, "both servers of this machine ship unaccent"
        cursor.execute("SELECT to_tsvector('quarry_french', 'Café crème')::text, to_tsvector('quarry_english', 'naïve Zoë')::text")
        assert cursor.fetchone() == ("'caf':1 'crem':2", "'naiv':1 'zoe':2")


def test_accents_do_not_matter_either_way(make: Callable[..., rag.RAGService]) -> None:
    service = make("acme", FRENCH + [rag.RAGDocument("menu", "Cafe menu: espresso and creme brulee.", title="Menu")])
    assert set(keyword(service, "cafe")) == {"cafe", "menu"}
    assert set(keyword(service, "café")) == {"cafe", "menu"}
    assert set(keyword(service, "CRÈME BRÛLÉE")) == {"cafe", "menu"}
    assert keyword(service, "elevage") == ["chevaux"]  # the title's É
    # Phrases and -words are tokenized as the index is.
    assert set(keyword(service, '"creme brulee"')) == {"cafe", "menu"}
    assert keyword(service, "cafe -espresso") == ["cafe"]


def test_degrades_to_accent_sensitive_without_unaccent(using: str) -> None:
    """The migration's configurations when the server lacks the extension: created, plain, working."""
    with connections[using].cursor() as cursor:
        for name, unaccent in (("quarry_test_plain", False), ("quarry_test_folded", True)):
            for statement in MIGRATION.configuration_sql("german", name, unaccent=unaccent):
                cursor.execute(statement)
        cursor.execute("SELECT to_tsvector('quarry_test_plain', 'Häuser Straße')::text, to_tsvector('quarry_test_folded', 'Häuser Straße')::text")
        plain, folded = cursor.fetchone()
    assert plain == "'haus':1 'strass':2"  # German's own stemmer folds its umlauts, not é
    assert folded == "'haus':1 'strass':2"
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT to_tsvector('quarry_test_plain', 'café')::text, to_tsvector('quarry_test_folded', 'café')::text")
        assert cursor.fetchone() == ("'café':1", "'caf':1")  # unaccent, then the German stemmer


# --- Chinese, Japanese, Korean -------------------------------------------------------------------


def test_cjk_runs_become_bigrams_and_other_text_is_untouched(using: str) -> None:
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT quarry_search_text('コーヒー豆'), quarry_search_text('커피를 마셔요'), quarry_search_text('plain text, 豆')")
        assert cursor.fetchone() == ("コー ーヒ ヒー ー豆", "커피 피를   마셔 셔요", "plain text,  豆")


def test_japanese_keyword_inside_a_sentence_is_found(make: Callable[..., rag.RAGService]) -> None:
    service = make("acme", JAPANESE + FRENCH)
    assert keyword(service, "コーヒー豆") == ["mame"]
    assert keyword(service, "コーヒー豆を挽く")[0] == "mame"
    assert keyword(service, "抹茶") == ["ocha"]
    assert keyword(service, '"コーヒー豆"') == ["mame"]
    assert keyword(service, "豆を挽") == ["mame"]


def test_chinese_and_korean_keywords_are_found(make: Callable[..., rag.RAGService]) -> None:
    korean = rag.RAGDocument("keopi", "저는 아침마다 커피를 마셔요.", title="아침")
    service = make("acme", CHINESE + [korean])
    assert keyword(service, "咖啡豆") == ["kafei"]
    assert keyword(service, "龙井茶") == ["cha"]
    assert keyword(service, "커피") == ["keopi"]
    assert keyword(service, "咖啡 -云南") == []


# --- a language per tenant -----------------------------------------------------------------------


def test_stemming_follows_the_tenant_language(make: Callable[..., rag.RAGService]) -> None:
    french = make("acme", FRENCH, language="french")
    german = make("globex", GERMAN, language="german")
    english = make("initech", FRENCH + GERMAN)
    assert keyword(french, "cheval") == ["chevaux"]  # chevaux -> cheval in French
    assert keyword(german, "Haus") == ["haeuser"]  # Häuser -> haus in German
    assert keyword(german, "Strasse") == ["strasse"]
    assert keyword(english, "cheval") == [] and keyword(english, "Haus") == []
    # Each tenant's statistics and postings use its own lexemes, and tenants stay apart.
    assert keyword(french, "Häuser") == [] and keyword(german, "chevaux") == []
    assert maintenance.search_config(PostgresBackend(german.backend.using), "globex") == "quarry_german"


def test_changing_the_language_reindexes_only_that_tenant(using: str, make: Callable[..., rag.RAGService]) -> None:
    acme = make("acme", GERMAN + JAPANESE)
    globex = make("globex", GERMAN)
    backend = PostgresBackend(using)
    assert keyword(acme, "Haus") == []
    assert maintenance.apply_search_language(backend, "acme", "german") is True
    assert maintenance.apply_search_language(backend, "acme", "german") is False  # twice: nothing more to do
    assert keyword(acme, "Haus") == ["haeuser"]
    assert keyword(acme, "コーヒー豆") == ["mame"]  # bigrams in every language
    assert keyword(globex, "Haus") == []
    acme_id = Tenant.objects.using(using).get(slug="acme").pk
    chunks = Chunk.objects.using(using).filter(tenant_id=acme_id)
    assert {str(c) for c in chunks.values_list("search_config", flat=True)} == {"quarry_german"}
    # The statistics are what a rebuild from scratch gives, and every chunk has its postings.
    stats = sorted(TermStat.objects.using(using).filter(tenant_id=acme_id).values_list("lexeme", "df"))
    corpus = CorpusStat.objects.using(using).filter(tenant_id=acme_id).values_list("chunk_count", "token_count").get()
    maintenance.rebuild_statistics(backend, "acme")
    assert stats == sorted(TermStat.objects.using(using).filter(tenant_id=acme_id).values_list("lexeme", "df"))
    assert corpus == CorpusStat.objects.using(using).filter(tenant_id=acme_id).values_list("chunk_count", "token_count").get()
    assert set(Posting.objects.using(using).filter(tenant_id=acme_id).values_list("chunk_id", flat=True)) == set(chunks.values_list("id", flat=True))
    # Documents ingested afterwards are tokenized in the new language too.
    async_to_sync(acme.ingest)([rag.RAGDocument("hof", "Die Höfe der Bauern liegen am Fluss.", title="Land")])
    assert keyword(acme, "Hof") == ["hof"]


def test_a_language_chosen_before_the_first_document_applies_to_it(world: object) -> None:
    acme = Tenant.objects.get(slug="acme")
    text_search.search_language_set(tenant=acme, language="french")
    service = _service("default", "acme")
    async_to_sync(service.ingest)(FRENCH)
    assert keyword(service, "cheval") == ["chevaux"]
    assert text_search.search_language_state(tenant=acme).reindexing is False


def test_the_service_records_the_request_and_applies_it(world: object) -> None:
    acme = Tenant.objects.get(slug="acme")
    service = _service("default", "acme")
    async_to_sync(service.ingest)(GERMAN)
    text_search.search_language_set(tenant=acme, language="german")
    state = text_search.search_language_state(tenant=acme)
    assert (state.requested, state.active, state.reindexing) == ("german", "english", True)
    assert keyword(service, "Haus") == []  # until the re-index has run, the old index answers
    assert text_search.search_languages_reclaim() == 1  # a lost task is queued again
    assert text_search.search_language_apply(namespace="acme") is True
    assert text_search.search_language_apply(namespace="acme") is False
    assert keyword(service, "Haus") == ["haeuser"]
    row = SearchLanguage.objects.get(tenant=acme)
    assert row.applied_at is not None and row.error == ""
    assert text_search.search_language_state(tenant=acme).reindexing is False
    assert text_search.search_languages_reclaim() == 0
    with pytest.raises(ValueError):
        text_search.search_language_set(tenant=acme, language="klingon")


@pytest.mark.django_db(transaction=True)
def test_searches_during_a_reindex_see_the_old_index_or_the_new_one() -> None:
    """The switch is one transaction: a search sees every chunk, statistic and posting in one
    language, old or new (a partial state would rank other chunks, or score them otherwise)."""
    Tenant.objects.get_or_create(slug="acme", defaults={"name": "acme"})
    service = _service("default", "acme")
    documents = [rag.RAGDocument(f"d{i:03}", f"Die Häuser Nummer {i} stehen am Markt." + " Markt" * (i % 7), title=f"Altstadt {i}") for i in range(300)]
    async_to_sync(service.ingest)(documents)

    def hits() -> list[tuple[str, float]]:
        return [(h.chunk.document_id, round(h.score, 9)) for h in async_to_sync(service.search)("Haus Markt", mode="keyword", limit=10)]

    before = hits()
    seen: list[list[tuple[str, float]]] = []
    done = threading.Event()

    def switch() -> None:
        try:
            maintenance.apply_search_language(PostgresBackend(), "acme", "german")
        finally:
            connections.close_all()
            done.set()

    thread = threading.Thread(target=switch)
    thread.start()
    while not done.is_set():  # how many searches land during the switch depends on the machine; each must be whole
        seen.append(hits())
    thread.join()
    after = hits()
    assert before != after  # "Häuser" only stems to "haus" in German
    assert all(result in (before, after) for result in seen)


# --- the admin -----------------------------------------------------------------------------------


def test_editor_sets_the_language_in_the_admin_and_the_reindex_is_queued(world, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import User
    from django.test import Client
    from django_q.models import OrmQ

    User.objects.filter(pk__in=[world.editor.pk, world.outsider.pk]).update(is_staff=True)
    editor, outsider = Client(), Client()
    editor.force_login(User.objects.get(pk=world.editor.pk))
    outsider.force_login(User.objects.get(pk=world.outsider.pk))
    service = _service("default", "acme")
    async_to_sync(service.ingest)(FRENCH)
    with django_capture_on_commit_callbacks(execute=True):
        response = editor.post("/admin/knowledge/searchlanguage/add/", {"tenant": world.acme.pk, "language": "french"})
    assert response.status_code == 302
    assert [task.func() for task in OrmQ.objects.all()] == [text_search.APPLY_TASK]
    listing = editor.get("/admin/knowledge/searchlanguage/")
    assert "english (re-indexing)" in listing.content.decode()
    assert keyword(service, "cheval") == []  # the old index answers until the task has run
    assert text_search.search_language_apply(namespace="acme") is True
    assert keyword(service, "cheval") == ["chevaux"]
    row = SearchLanguage.objects.get(tenant=world.acme)
    assert outsider.get(f"/admin/knowledge/searchlanguage/{row.pk}/change/").status_code in (302, 403, 404)
    assert "french" in editor.get(f"/admin/knowledge/searchlanguage/{row.pk}/change/").content.decode()
    # An editor may not pick another tenant.
    response = editor.post("/admin/knowledge/searchlanguage/add/", {"tenant": world.globex.pk, "language": "german"})
    assert response.status_code == 200 and not SearchLanguage.objects.filter(tenant=world.globex).exists()


@pytest.mark.django_db(transaction=True)
def test_ingests_and_deletions_during_a_reindex_land_in_the_new_language() -> None:
    """Writes of the tenant queue behind the switch or finish before it: none deadlocks, and no chunk
    is left in the old configuration, whatever the interleaving."""
    Tenant.objects.get_or_create(slug="acme", defaults={"name": "acme"})
    service = _service("default", "acme")
    async_to_sync(service.ingest)([rag.RAGDocument(f"d{i:03}", f"Die Häuser Nummer {i} stehen am Markt.") for i in range(300)])
    errors: list[BaseException] = []

    def switch() -> None:
        try:
            maintenance.apply_search_language(PostgresBackend(), "acme", "german")
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=switch)
    thread.start()
    for n in range(5):
        async_to_sync(service.ingest)([rag.RAGDocument(f"new{n}", f"Neue Häuser im Viertel {n}.")])
        async_to_sync(service.delete)([f"d{n:03}"])
    thread.join()
    assert errors == []
    acme_id = Tenant.objects.get(slug="acme").pk
    configs = {str(c) for c in Chunk.objects.filter(tenant_id=acme_id).values_list("search_config", flat=True)}
    assert configs == {"quarry_german"} == {str(CorpusStat.objects.get(tenant_id=acme_id).search_config)}
    stats = sorted(TermStat.objects.filter(tenant_id=acme_id).values_list("lexeme", "df"))
    maintenance.rebuild_statistics(PostgresBackend(), "acme")
    assert stats == sorted(TermStat.objects.filter(tenant_id=acme_id).values_list("lexeme", "df"))
    assert {f"new{n}" for n in range(5)} <= set(h.chunk.document_id for h in async_to_sync(service.search)("Viertel Haus", mode="keyword", limit=100))


def test_the_command_shows_sets_and_applies_the_language(world: object) -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    async_to_sync(_service("default", "acme").ingest)(FRENCH)
    out = StringIO()
    call_command("search_language", tenant="acme", stdout=out)
    assert out.getvalue() == "tenant acme: language english, index in english: applied\n"
    out = StringIO()
    call_command("search_language", tenant="acme", language="french", stdout=out)
    assert out.getvalue() == "tenant acme: language french, index in english: re-indexing (queued)\n"
    out = StringIO()
    call_command("search_language", tenant="acme", language="french", now=True, stdout=out)
    assert out.getvalue() == "tenant acme: language french, index in french: applied\n"
    with pytest.raises(CommandError):
        call_command("search_language", tenant="nobody")


def test_snippets_mark_accented_and_cjk_matches() -> None:
    from knowledge.highlight import highlight, query_terms, terms_pattern

    pattern = terms_pattern(query_terms("cafe crème コーヒー豆"))
    assert str(highlight("Le Café sert une CRÈME. 私は毎朝コーヒー豆を挽く", pattern)) == (
        "Le <mark>Café</mark> sert une <mark>CRÈME</mark>. 私は毎朝<mark>コーヒー豆</mark>を挽く"
    )
    assert str(highlight("cafe creme", terms_pattern(query_terms("café")))) == "<mark>cafe</mark> creme"
