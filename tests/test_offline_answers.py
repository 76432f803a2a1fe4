"""The offline model's sentence selection (chat.llm.selection) and its answers (chat.llm.offline), on small passages.

Most tests use the real local embedder (``_sync_vectors``); the relevance floor and the
near-duplicate rule are also checked with explicit vectors, so the rule and not the
model decides.
"""

from __future__ import annotations

import pytest

from chat.llm.offline import CANNOT_ANSWER, Passage, _sync_vectors, answer_from
from chat.llm.selection import Tuning, answer_type, bridge_query, instruction_of, select, units_of
from chat.prompting import CitationMarkers


def test_the_relevance_floor_keeps_only_sentences_close_enough_to_the_question() -> None:
    passages = [(1, "Espresso is brewed at nine bars of pressure. The office kettle is on the second floor.")]
    # The question's vector, then one per sentence: cosines 0.8 and 0.2 (unit vectors).
    vectors = {"brew": [1.0, 0.0], "Espresso": [0.8, 0.6], "The office": [0.2, 0.9798]}

    def embed(texts: list[str]) -> list[list[float]]:
        return [next(v for key, v in vectors.items() if text.startswith(key)) for text in texts]

    chosen = select("brew espresso office", passages, vectors=embed, tuning=Tuning(floor=0.5, stop_ratio=0.0))
    assert [u.text for u in chosen.units] == ["Espresso is brewed at nine bars of pressure."]
    nothing = select("brew espresso office", passages, vectors=embed, tuning=Tuning(floor=0.9))
    assert nothing.units == [] and nothing.closest == [1]


def test_page_furniture_is_never_quoted() -> None:
    text = (
        "Home | Docs | Blog | Pricing\n\n"
        "12/1/26, 7:09 AM Home office guide\n\n"
        "A home office needs a desk at elbow height and a chair that supports the lower back.\n\n"
        "file:///Users/ann/guide.html 1/3\n\n"
        "© 2024 Office Co. All rights reserved."
    )
    units = units_of(1, text)
    assert [u.text for u in units] == ["A home office needs a desk at elbow height and a chair that supports the lower back."]
    answer = answer_from("How do I set up a home office?", [Passage(1, text, "Guide")], vectors=_sync_vectors)
    assert "desk at elbow height" in answer
    for furniture in ("Docs", "7:09", "file://", "rights reserved"):
        assert furniture not in answer


def test_a_fenced_code_block_is_quoted_whole() -> None:
    code = "```python\ndef brew(grams: int) -> str:\n    return f\"{grams} g of coffee\"\n```"
    text = f"To brew coffee in Python, call the brew function with the grams of coffee.\n\n{code}\n\nThat is all."
    [sentence, block] = [u for u in units_of(1, text) if u.kind != "sentence" or "brew" in u.text]
    assert block.kind == "code" and block.text == code
    answer = answer_from("Show me the Python code of the brew function for coffee", [Passage(1, text, "Recipes")],
                         vectors=_sync_vectors, tuning=Tuning(stop_ratio=0.0))
    assert code in answer  # newlines and indentation kept, not "``python def brew…``"


def test_list_items_and_table_rows_are_units_of_their_own() -> None:
    text = ("Steps:\n\n- Grind the beans\n  just before brewing.\n- Pour water at 94 degrees.\n\n"
            "| Region | Growth |\n| --- | ---: |\n| EU | 12% |\n| Asia | 9% |")
    units = units_of(1, text)
    assert [(u.kind, u.text) for u in units] == [
        ("item", "Grind the beans just before brewing."), ("item", "Pour water at 94 degrees."),
        ("row", "Region | Growth \u2014 EU | 12%"), ("row", "Region | Growth \u2014 Asia | 9%"),
    ]


def test_abbreviations_do_not_end_a_sentence() -> None:
    units = units_of(1, "The first president was G. Stanley Hall. Dr. Smith followed him in the U.S. Army. It grew.")
    assert [u.text for u in units] == ["The first president was G. Stanley Hall.", "Dr. Smith followed him in the U.S. Army."]


@pytest.mark.parametrize(("question", "count", "shape"), [
    ("Summarise the coffee guide in two sentences", 2, "summary"),
    ("Explain it in 3 bullets", 3, "list"),
    ("List the brewing steps", None, "list"),
    ("Give me a summary of roasting", None, "summary"),
    ("Quote what the guide says about water", None, "quote"),
    ("How hot should the water be?", None, "quote"),
])
def test_instructions_in_the_question(question: str, count: int | None, shape: str) -> None:
    found = instruction_of(question)
    assert (found.count, found.shape, found.code) == (count, shape, False)
    assert instruction_of("Show the code of brew").code


def test_in_two_sentences_gives_two_sentences() -> None:
    text = (
        "Coffee beans are roasted at about 220 degrees. Light roasts keep more acidity. "
        "Dark roasts taste more bitter. Roasted coffee should rest for a day before brewing."
    )
    answer = answer_from("Summarise coffee roasting in two sentences", [Passage(1, text, "Roasting")], vectors=_sync_vectors)
    assert answer.startswith("In short, from the knowledge base:")
    assert answer.count("[1]") == 2


def test_near_duplicates_are_quoted_once() -> None:
    sentence = "Uploads are processed in the background by workers."
    passages = [Passage(1, f"Editors upload files. {sentence}", "Admin"), Passage(2, f"{sentence} They retry twice.", "Admin")]
    answer = answer_from("How are uploads processed?", passages, vectors=_sync_vectors, tuning=Tuning(stop_ratio=0.0))
    assert answer.count(sentence) == 1


def test_cannot_answer_names_the_closest_documents_instead_of_quoting() -> None:
    passages = [Passage(1, "Espresso is brewed at nine bars of pressure.", "Espresso guide"),
                Passage(2, "Grind the beans just before brewing them.", "Grinding")]
    answer = answer_from("Who painted the Mona Lisa?", passages, vectors=_sync_vectors)
    assert answer.startswith(CANNOT_ANSWER)
    assert "\u201cEspresso guide\u201d" in answer and "\u201cGrinding\u201d" in answer
    assert "[" not in answer  # nothing quoted, so nothing cited


def test_markers_are_renumbered_in_order_of_first_use_across_deltas() -> None:
    markers = CitationMarkers(5)
    out = [markers.feed(piece) for piece in ("Roasting [", "4] takes time [2", "]; beans [4] rest [2, 3]", " [9].")]
    assert "".join(out) + markers.flush() == "Roasting [1] takes time [2]; beans [1] rest [2, 3] [9]."
    assert markers.used == [4, 2, 3]  # [9] names no passage of the prompt and is left alone
    held = CitationMarkers(2)
    assert held.feed("see [1") == "see " and held.flush() == "[1"


def test_evaluate_answers_normalizes_gold_answers_like_squad() -> None:
    from chat.management.commands.evaluate_answers import contains_answer

    assert contains_answer("- \u201cIts first president was G. Stanley Hall.\u201d [1]", "G. Stanley Hall")
    assert contains_answer("It belongs to the Anglican Communion [2].", "the Anglican Communion")
    assert not contains_answer("It opened in 19985.", "1998")  # whole words only
    assert not contains_answer("anything", "")


@pytest.mark.django_db
def test_evaluate_answers_refuses_a_missing_folder_or_tenant(tmp_path: object) -> None:
    from pathlib import Path

    from django.core.management import call_command
    from django.core.management.base import CommandError

    folder = Path(str(tmp_path))
    with pytest.raises(CommandError, match="queries.jsonl not found"):
        call_command("evaluate_answers", str(folder), "--tenant", "acme")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "Who?", "answer": "Ann"}\n')
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(CommandError, match="Tenant 'nowhere' not found: run manage.py evaluate"):
        call_command("evaluate_answers", str(folder), "--tenant", "nowhere")


def test_with_the_passages_similarities_nothing_is_embedded_and_the_passage_floor_applies() -> None:
    passages = [Passage(1, "Espresso is brewed at nine bars of pressure. The grinder sits by the sink.", "Espresso"),
                Passage(2, "Espresso cups are kept warm on the machine.", "Cups")]

    def never(texts: list[str]) -> list[list[float]]:
        raise AssertionError("the passages' similarities are known: nothing should be embedded")

    tuning = Tuning(passage_floor=0.4, stop_ratio=0.0)
    answer = answer_from("How is espresso brewed?", passages, vectors=never, similarity={1: 0.7, 2: 0.2}, tuning=tuning)
    assert "nine bars of pressure" in answer and "[1]" in answer
    assert "cups" not in answer.lower()  # passage 2 shares "espresso" but is below the passage floor
    assert "grinder" not in answer  # shares no word of the question
    below = answer_from("How is espresso brewed?", passages, similarity={1: 0.1, 2: 0.2}, tuning=tuning)
    assert below.startswith(CANNOT_ANSWER)


def test_a_sentence_drowned_in_a_long_unrelated_passage_is_still_quoted() -> None:
    """Retrieval ranks a ledger chunk first for its one memo line (keyword and semantic alike), but the
    chunk's vector is mostly ledger, so its similarity is under the passage floor. The offline model
    then embeds the best sentences and judges them by their own: it quotes the memo, and still
    declines a question nothing answers."""
    from asgiref.sync import async_to_sync

    from chat.llm.offline import extractive_answer_async
    from chat.prompting import build_messages
    from knowledge import rag

    def hit(number: int, text: str) -> rag.RAGHit:
        return rag.RAGHit(rag.RAGChunk(f"doc{number}:0", f"doc{number}", "acme", text), 1.0 / number)

    ledger = "\n".join(f"Ledger entry {n}: granite wharf crane tonnage berth quay tide cargo ballast." for n in range(12))
    memo = "MEMO: the night ferry to Gull Island was cancelled because its engine failed a safety inspection."
    hits = [hit(1, f"{ledger}\n{memo}\n{ledger}"), hit(2, "The harbour office opens at eight on weekdays.")]

    def ask(question: str) -> str:
        messages = build_messages(template="default", hits=hits, memory=[], prompt=question)
        # Both under the passage floor (0.35).
        return async_to_sync(extractive_answer_async)(messages, similarity={1: 0.2, 2: 0.1})

    answer = ask("Why was the night ferry to Gull Island cancelled?")
    assert "engine failed a safety inspection" in answer and "[1]" in answer and "Ledger entry" not in answer
    assert ask("Who painted the Mona Lisa?").startswith(CANNOT_ANSWER)
    # Without an embedder to ask, the passages' similarities decide alone, as before.
    question = "Why was the night ferry to Gull Island cancelled?"
    assert answer_from(question, [Passage(1, f"{ledger}\n{memo}", "")], similarity={1: 0.2}).startswith(CANNOT_ANSWER)


def test_the_pipelines_similarities_reach_the_offline_model_as_data_of_the_call_only() -> None:
    """``stream_chat(similarities=...)`` puts them in litellm's call metadata, which litellm hands the provider
    as ``litellm_params``; a call without them carries none (no state of the process or the context)."""
    from chat.llm.catalog import SIMILARITIES
    from chat.llm.offline import similarities_of

    assert similarities_of({"litellm_params": {"metadata": {SIMILARITIES: {"1": 0.5}}}}) == {1: 0.5}
    assert similarities_of({"litellm_params": {"metadata": {"model_group": "chat"}}}) is None
    assert similarities_of({}) is None


@pytest.mark.parametrize(("question", "kind"), [
    ("How many stores does Publix have?", "number"), ("When was the bridge opened?", "date"),
    ("In which year did it close?", "date"), ("Where is the Bubye River?", "place"),
    ("What county is Johnnycake in?", "place"), ("Who founded the company?", "name"), ("Why is the sky blue?", None),
])
def test_the_answer_type_comes_from_the_wh_phrase(question: str, kind: str | None) -> None:
    assert answer_type(question) == kind


def test_a_sentence_holding_what_the_question_asks_for_comes_first() -> None:
    # Same words of the question in both; only one holds a number, which "how many" asks for.
    text = "The harbor berths ferries and fishing boats. The harbor counts 42 berths in total."
    chosen = select("How many berths does the harbor have?", [(1, text)], similarity={1: 0.6}, tuning=Tuning(max_units=1))
    assert [u.text for u in chosen.units] == ["The harbor counts 42 berths in total."]
    plain = select("How many berths does the harbor have?", [(1, text)], similarity={1: 0.6},
                   tuning=Tuning(max_units=1, type_weight=0.0))
    assert [u.text for u in plain.units] == ["The harbor berths ferries and fishing boats."]


def test_the_passage_a_quoted_sentence_names_by_its_title_is_the_next_hop() -> None:
    passages = [Passage(1, "Hello Love is a 1974 single by Hank Snow.", "Hello Love (song)"),
                Passage(2, "Clarence Eugene Snow died in Madison, Tennessee, in 1999.", "Hank Snow")]
    question = "Where did the performer of Hello Love die?"
    answer = answer_from(question, passages, similarity={1: 0.6, 2: 0.4})
    assert "Hank Snow" in answer and "Madison, Tennessee" in answer and "[2]" in answer  # passage 2 shares no question word
    # Without the title bonus the bridge-name rule still reaches it ("Snow" is in passage 2's title); without hops: not.
    assert "Madison" in answer_from(question, passages, similarity={1: 0.6, 2: 0.4}, tuning=Tuning(title_weight=0.0))
    alone = answer_from(question, passages, similarity={1: 0.6, 2: 0.4}, tuning=Tuning(title_weight=0.0, hop_weight=0.0))
    assert "Madison" not in alone


def test_the_offline_model_reuses_the_vectors_of_texts_it_embedded_before() -> None:
    from asgiref.sync import async_to_sync

    from chat.llm.offline import VectorCache

    asked: list[list[str]] = []

    class Counting:
        model_id = "test/counting"

        async def embed(self, texts: list[str], *, kind: str = "document") -> list[list[float]]:
            asked.append(list(texts))
            return [[float(len(t)), 1.0] for t in texts]

    cache, embedder = VectorCache(), Counting()
    first = async_to_sync(cache.embed)(embedder, ["a question", "a sentence"])
    again = async_to_sync(cache.embed)(embedder, ["a sentence", "another sentence"])
    assert asked == [["a question", "a sentence"], ["another sentence"]]  # "a sentence" was not embedded twice
    assert again is not None and first is not None and again[0] == first[1]
    # Another embedder instance (a settings change) is never answered with the first one's vectors.
    async_to_sync(cache.embed)(Counting(), ["a sentence"])
    assert asked[-1] == ["a sentence"]


def test_long_answers_stream_in_a_bounded_number_of_deltas() -> None:
    from chat.llm.offline import deltas

    short = "From the knowledge base: one two three"
    assert list(deltas(short)) == ["From ", "the ", "knowledge ", "base: ", "one ", "two ", "three"]  # a word each
    long = " ".join(f"word{n}" for n in range(100))
    pieces = list(deltas(long, most=24))
    assert "".join(pieces) == long and len(pieces) <= 25 and len(pieces) > 10


GREENFIELD = [Passage(1, "Greenfield-Central High School is a secondary school located in the city of Greenfield, Indiana.",
                      "Greenfield-Central High School"),
              Passage(2, "In Indiana, alcohol may be sold only during the hours 7 a.m. to 3 a.m.", "Alcohol laws of Indiana"),
              Passage(3, "Restaurants in Utah can sell alcohol until 1 a.m. under a dining club licence.", "Alcohol laws of Utah")]
GREENFIELD_QUESTION = "What time does the state where Greenfield-Central High is stop selling booze?"


def test_the_next_hop_is_the_unit_holding_a_name_the_first_pick_holds_and_the_question_does_not() -> None:
    # Passage 2 shares no word with the question ("sold" is not "selling"): only "Indiana", which the
    # first pick names, leads to it; passage 3 shares "sell" but names nothing the pick does.
    similarity = {1: 0.5, 2: 0.45, 3: 0.47}
    answer = answer_from(GREENFIELD_QUESTION, GREENFIELD, similarity=similarity)
    assert "Greenfield, Indiana" in answer and "7 a.m. to 3 a.m." in answer and "[2]" in answer
    without = answer_from(GREENFIELD_QUESTION, GREENFIELD, similarity=similarity, tuning=Tuning(hop_weight=0.0))
    assert "3 a.m." not in without


def test_the_bridge_query_is_the_new_names_of_the_best_sentence_and_the_questions_other_words() -> None:
    numbered = [(p.number, p.text) for p in GREENFIELD]
    titles = {p.number: p.title for p in GREENFIELD}
    query = bridge_query(GREENFIELD_QUESTION, numbered, titles=titles, similarity={1: 0.5, 2: 0.45, 3: 0.47})
    assert query is not None and "Indiana" in query.split()
    assert "booze" in query.split() and "Greenfield" not in query.split()  # held by the sentence: already found
    # A sentence naming nothing the question does not: no second hop.
    assert bridge_query("Where is Greenfield-Central High School?", [(1, "Greenfield-Central High School is a school.")],
                        similarity={1: 0.6}) is None
    assert bridge_query("Summarise Greenfield-Central High in two sentences", numbered, similarity={1: 0.5}) is None
