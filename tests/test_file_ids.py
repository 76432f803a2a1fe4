"""Document ids from file names (knowledge.services.file_ids): the one rule behind uploads and ``manage.py ingest``."""

from __future__ import annotations

import re
import unicodedata

import pytest

from knowledge.rag import limits
from knowledge.services.file_ids import FileNameError, document_id_candidates, file_name

AWKWARD = [
    "咖啡指南.md", "日本茶.md", "笔记.txt", "café.txt", "cafe\u0301.txt", "Q3 report.pdf", "Report 日本.pdf", "!!!.md", ".txt",
    "../../etc/passwd", "C:\\Users\\me\\y.docx", "_notes.txt", "x" * 300 + ".txt", "日" * 300 + ".txt", "ß.txt", "ＡＢＣ.txt",
    "a\x00b.txt", "file.日本", "a:b.txt", "ends with dot.", "-leading.txt", "Ελληνικά.pdf", "हिन्दी.txt", "emoji 🎉.md",
]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Q3 report.pdf", "Q3-report.pdf"),  # unchanged from before: documents uploaded earlier are found again
        ("café.txt", "cafe.txt"),
        ("cafe\u0301.txt", "cafe.txt"),
        ("ＡＢＣ.txt", "ABC.txt"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\y.docx", "y.docx"),
        ("_notes.txt", "notes.txt"),
    ],
)
def test_a_name_an_id_can_spell_keeps_its_letters(name: str, expected: str) -> None:
    assert document_id_candidates(name)[0] == expected


@pytest.mark.parametrize("name", ["咖啡指南.md", "Report 日本.pdf", "!!!.md", "ß.txt", "x" * 300 + ".txt"])
def test_a_name_that_would_lose_letters_or_length_has_only_its_hashed_id(name: str) -> None:
    [only] = document_id_candidates(name)
    assert re.fullmatch(r"(?:[A-Za-z0-9.-]+-)?[0-9a-f]{8}\.(md|pdf|txt)", only) and len(only) <= 200, only


@pytest.mark.parametrize("name", AWKWARD)
def test_every_candidate_is_a_valid_new_id_and_the_same_in_any_normal_form(name: str) -> None:
    candidates = document_id_candidates(name)
    assert all(limits.is_document_id(c) and ":" not in c for c in candidates), candidates
    assert document_id_candidates(unicodedata.normalize("NFD", name)) == document_id_candidates(unicodedata.normalize("NFC", name)) == candidates


def test_distinct_names_never_share_every_candidate() -> None:
    names = AWKWARD + ["cafe.txt", "a b.txt", "a-b.txt", "Notes.txt", "notes.txt"]
    finals = {document_id_candidates(n)[-1] for n in {file_name(n) for n in names}}
    assert len(finals) == len({file_name(n) for n in names})


def test_ingest_keeps_folders_and_never_climbs() -> None:
    assert document_id_candidates("sub/page.html", folders=True)[0] == "sub/page.html"
    assert document_id_candidates("a/../../b.txt", folders=True)[0] == "a/b.txt"
    assert file_name("a/..") == "a"  # '..' is dropped, never followed
    assert file_name("a\\b/c.txt") == "c.txt" and file_name("a\\b/c.txt", folders=True) == "a/b/c.txt"


@pytest.mark.parametrize("name", ["", ".", "..", "...", "/", "./..", "\x00"])
def test_a_name_with_nothing_left_is_refused(name: str) -> None:
    with pytest.raises(FileNameError, match="is not a file name"):
        document_id_candidates(name)
