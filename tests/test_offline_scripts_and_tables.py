"""Issue 30: the offline model answers Chinese and Japanese questions and quotes table rows; an English
embedder's cosines to CJK text count for nothing, in retrieval and in the offline model alike.

The selection tests use the real local embedder (``_sync_vectors``) or no embedder at all; the
retrieval and chat tests run against real PostgreSQL with the deployment's default embedder
(bge-small-en, which declares that it reads Latin script only).
"""

from __future__ import annotations

import io
import json

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

from chat.llm.offline import CANNOT_ANSWER, Passage, _sync_vectors, answer_from
from chat.llm.units import term_list, units_of
from knowledge import rag
from knowledge.extraction import extract
from tests.conftest import World
from tests.embedders import BagOfWordsEmbedder

YUNNAN = Passage(1, "云南是中国最大的咖啡产区，主要种植阿拉比卡咖啡。云南咖啡豆的价格是每公斤八十元。普洱和保山是主要产地！", "云南咖啡")
BREAKFAST = Passage(2, "我们每天早上喝咖啡，这些咖啡豆来自云南。", "早餐")
MATCHA = Passage(1, "京都では抹茶と和菓子を楽しみました。抹茶の価格は百グラムで二千円です。宇治の抹茶は特に有名です。", "抹茶")
REGIONS = ("Sales regions\n\nEach sales region has one manager.\n\n"
           "Region | Manager\nNorth | Ana Costa\nEast | Yuki Tanabe\nSouth | Omar Haddad")  # as Word's tables extract


# --- Chinese and Japanese sentences -----------------------------------------------------------------


def test_a_chinese_question_is_answered_with_the_chinese_sentence_that_holds_its_terms() -> None:
    answer = answer_from("云南咖啡豆的价格是多少？", [YUNNAN, BREAKFAST], vectors=_sync_vectors)
    assert answer.splitlines()[2:] == ["- \u201c云南咖啡豆的价格是每公斤八十元。\u201d [1]"]


def test_a_japanese_question_is_answered_likewise() -> None:
    answer = answer_from("抹茶の価格は？", [MATCHA], vectors=_sync_vectors)
    assert "抹茶の価格は百グラムで二千円です。" in answer and "[1]" in answer
    assert "宇治" not in answer and "京都" not in answer  # they name matcha, not its price


def test_a_cjk_question_nothing_answers_is_still_declined() -> None:
    assert answer_from("杭州的龙井茶多少钱？", [YUNNAN, BREAKFAST], vectors=_sync_vectors).startswith(CANNOT_ANSWER)


@pytest.mark.parametrize("text", [
    "第一句话在这里结束。第二句话也在这里！第三句话是问题吗？",
    "第一句话在这里结束｡第二句话也在这里!第三句话是问题吗?",  # the halfwidth marks
    "第一句话在这里结束．第二句话也在这里！第三句话是问题吗？",  # the fullwidth full stop
    "서울은 한국의 수도입니다. 부산은 큰 항구 도시입니다. 제주도는 아름다운 섬입니다.",  # Korean's spaced full stops
])
def test_cjk_sentences_end_at_their_own_marks_fullwidth_or_halfwidth(text: str) -> None:
    assert len(units_of(1, text)) == 3


def test_a_closing_quote_stays_with_its_sentence_and_a_wrapped_line_is_not_split() -> None:
    units = units_of(1, "他说：「价格是每公斤八十元。」然后我们一起\n去了普洱的咖啡园。")
    assert [u.text for u in units] == ["他说：「价格是每公斤八十元。」", "然后我们一起去了普洱的咖啡园。"]


def test_cjk_terms_are_character_bigrams_without_the_grammar() -> None:
    assert term_list("云南咖啡豆的价格是多少？") == ("云南", "南咖", "咖啡", "啡豆", "价格")
    assert term_list("抹茶の価格は？") == ("抹茶", "価格")
    assert term_list("Quarry的价格") == ("quarry", "价格")


def test_a_question_is_answered_in_its_own_script_whatever_the_cosines() -> None:
    """An English model's cosine puts CJK text close to any English question; an extractive answer in
    another language than the question's is no answer to it, so neither is quoted for the other."""
    english = Passage(1, "Quarry is a knowledge base with retrieval-augmented chat for teams.", "What is Quarry")
    chinese = Passage(2, "Quarry 的价格是每月十美元，团队版的价格是每月二十美元。", "Quarry 价格")
    similarity = {1: 0.5, 2: 0.9}  # the Chinese passage "closer" to the English question, as bge-small puts it
    answer = answer_from("What is the price of Quarry?", [english, chinese], similarity=similarity)
    assert "美元" not in answer
    chinese_answer = answer_from("Quarry 的价格是多少？", [english, chinese], similarity={1: 0.9})
    assert "每月十美元" in chinese_answer and "[2]" in chinese_answer and "retrieval-augmented" not in chinese_answer


# --- Tables ----------------------------------------------------------------------------------------


def test_a_row_of_an_extracted_table_is_quoted_with_its_header() -> None:
    answer = answer_from("Who manages the East region?", [Passage(1, REGIONS, "Sales regions")], vectors=_sync_vectors)
    assert answer.splitlines()[2:] == ["- Region | Manager \u2014 East | Yuki Tanabe [1]"]


def test_tab_separated_rows_are_rows_too() -> None:
    text = "Region\tManager\nNorth\tAna Costa\nEast\tYuki Tanabe"
    assert [(u.kind, u.text) for u in units_of(1, text)] == [
        ("row", "Region | Manager \u2014 North | Ana Costa"), ("row", "Region | Manager \u2014 East | Yuki Tanabe"),
    ]


def _docx_table(rows: list[list[str]]) -> bytes:
    import docx  # deferred, as extraction defers it: only this test builds a Word file

    document = docx.Document()
    document.add_heading("Inventory", level=1)
    table = document.add_table(rows=len(rows), cols=len(rows[0]))
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            table.cell(r, c).text = cell
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


@pytest.mark.parametrize(("name", "data"), [
    ("inventory.html", (b"<html><body><main><h1>Inventory</h1><table>"
                        b"<tr><th>Item</th><th>Quantity</th><th>Unit price</th></tr>"
                        b"<tr><td>Espresso beans</td><td>120 kg</td><td>18 EUR</td></tr>"
                        b"<tr><td>Milk frother</td><td>35</td><td>49 EUR</td></tr>"
                        b"<tr><td>Ceramic cups</td><td>600</td><td>3 EUR</td></tr></table></main></body></html>")),
    ("inventory.docx", None),
])
def test_an_extracted_table_is_never_one_giant_sentence(name: str, data: bytes | None) -> None:
    if data is None:
        data = _docx_table([["Item", "Quantity", "Unit price"], ["Espresso beans", "120 kg", "18 EUR"],
                            ["Milk frother", "35", "49 EUR"], ["Ceramic cups", "600", "3 EUR"]])
    text = extract(data, filename=name).text
    rows = [u for u in units_of(1, text) if "|" in u.text]
    assert [(u.kind, u.text) for u in rows] == [
        ("row", "Item | Quantity | Unit price \u2014 Espresso beans | 120 kg | 18 EUR"),
        ("row", "Item | Quantity | Unit price \u2014 Milk frother | 35 | 49 EUR"),
        ("row", "Item | Quantity | Unit price \u2014 Ceramic cups | 600 | 3 EUR"),
    ]
    question = "What is the unit price of the milk frother?"
    answer = answer_from(question, [Passage(1, text, "Inventory")], vectors=_sync_vectors)
    assert "Milk frother | 35 | 49 EUR [1]" in answer and "Espresso" not in answer


def test_one_pipe_in_a_line_of_prose_is_still_prose() -> None:
    units = units_of(1, "Quarry | the knowledge base that answers with its sources and never guesses.")
    assert [u.kind for u in units] == ["sentence"]


# --- Retrieval: the English model's cosines to CJK text ---------------------------------------------

ENGLISH = [
    rag.RAGDocument("report", "The quarterly report lists revenue, costs and the headcount of every office.",
                    title="Report"),
    rag.RAGDocument("travel", "Travel expenses are refunded within thirty days of the trip.", title="Travel"),
    rag.RAGDocument("parking", "Staff parking is behind the north building.", title="Parking"),
]
CJK = [
    rag.RAGDocument("kafei", "我们每天早上喝咖啡，这些咖啡豆来自云南。", title="早餐"),
    rag.RAGDocument("cha", "杭州的龙井茶非常有名。", title="茶叶"),
    rag.RAGDocument("ocha", "京都では抹茶と和菓子を楽しみました。", title="旅行"),
    rag.RAGDocument("mame", "私は毎朝コーヒー豆を挽いてから会社に出かけます。", title="朝の習慣"),
]


def _indexed(embedder: rag.Embedder, namespace: str) -> rag.RAGService:
    from accounts.models import Tenant

    Tenant.objects.get_or_create(slug=namespace, defaults={"name": namespace})
    service = rag.postgres(embedder, None, namespace=namespace)
    async_to_sync(service.ingest)([*ENGLISH, *CJK])
    return service


@pytest.mark.django_db
def test_short_cjk_documents_do_not_top_an_english_models_semantic_results() -> None:
    service = _indexed(rag.default_embedder(), "scripts")
    found = async_to_sync(service.search)("What was the revenue in Q3?", mode="semantic", limit=5)
    # The English documents only (their order after the first is the model's business), none of the CJK ones.
    assert found[0].chunk.document_id == "report"
    assert sorted(h.chunk.document_id for h in found) == ["parking", "report", "travel"]
    hybrid = async_to_sync(service.search)("What was the revenue in Q3?", mode="hybrid", limit=5)
    assert {h.chunk.document_id for h in hybrid} <= {"report", "travel", "parking"}


@pytest.mark.django_db
def test_a_cjk_query_to_an_english_model_is_answered_by_its_keyword_leg_alone() -> None:
    service = _indexed(rag.default_embedder(), "scripts")
    hybrid = async_to_sync(service.search)("咖啡豆", mode="hybrid", limit=5)
    assert [h.chunk.document_id for h in hybrid] == ["kafei"]
    assert hybrid[0].semantic_similarity is None and hybrid[0].keyword_score is not None
    assert async_to_sync(service.search)("咖啡豆", mode="semantic", limit=5) == ()


@pytest.mark.django_db
def test_an_embedder_that_declares_no_scripts_is_trusted_with_every_one() -> None:
    service = _indexed(BagOfWordsEmbedder(), "scripts")  # a test's model, multilingual as far as Quarry knows
    found = async_to_sync(service.search)("咖啡豆", mode="semantic", limit=10)
    assert len(found) == len(ENGLISH) + len(CJK)


# --- Chat, end to end ------------------------------------------------------------------------------


def _chat(question: str, tenant: str) -> dict[str, object]:
    out = io.StringIO()
    call_command("chat", question, "--tenant", tenant, "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def test_chat_answers_chinese_and_japanese_questions_and_table_rows(world: World) -> None:
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)([
        rag.RAGDocument("yunnan", YUNNAN.text, title=YUNNAN.title),
        rag.RAGDocument("kafei", BREAKFAST.text, title=BREAKFAST.title),
        rag.RAGDocument("matcha", MATCHA.text, title=MATCHA.title),
        rag.RAGDocument("regions", REGIONS, title="Sales regions"),
    ])
    chinese = _chat("云南咖啡豆的价格是多少？", "acme")
    assert "云南咖啡豆的价格是每公斤八十元。" in chinese["message"]["content"]  # type: ignore[index]
    assert [c["document_id"] for c in chinese["citations"]] == ["yunnan"]  # type: ignore[index, union-attr]
    japanese = _chat("抹茶の価格は？", "acme")
    assert "抹茶の価格は百グラムで二千円です。" in japanese["message"]["content"]  # type: ignore[index]
    east = _chat("Who manages the East region?", "acme")
    assert "Region | Manager \u2014 East | Yuki Tanabe [1]" in east["message"]["content"]  # type: ignore[index]
    assert "North" not in east["message"]["content"]  # type: ignore[index]
    revenue = _chat("What was the revenue in Q3?", "acme")
    passages = [*revenue["citations"], *revenue["also_retrieved"]]  # type: ignore[misc]
    retrieved = [h["document_id"] for h in passages]
    assert not {"yunnan", "kafei", "matcha"} & set(retrieved)
