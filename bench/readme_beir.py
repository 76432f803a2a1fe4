"""A small judged collection of our own, held out from every tuning: Quarry's README as a corpus (issue 36).

    .venv/bin/python bench/readme_beir.py var/readme-beir
    .venv/bin/python manage.py evaluate var/readme-beir --tenant readme --modes hybrid --fusions score --rerank colbert --json

The corpus is the README of commit cf6c22c (fixed, so the set does not move with the README), one
document per paragraph of prose (code blocks and tables left out; at least 120 characters), titled
by its section. Each question paraphrases one fact in words of its own (an operator's question,
not the README's sentence), and is judged relevant to the one paragraph that holds ``marker``.
Written before any re-ranking figure on it was seen.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMIT = "cf6c22c"

# (question, a phrase only the answering paragraph holds)
QUESTIONS: list[tuple[str, str]] = [
    ("what happens to the database when I stop the dev server with ctrl-c", "the embedded PostgreSQL keeps running"),
    ("how often is a crashed background worker restarted and when does everything give up", "five deaths within a"),
    ("can I run several web servers against one database and queue", "To scale out"),
    ("what does a request do when every pooled database connection is taken", "503 overloaded` with `Retry-After`"),
    ("is it safe to put a connection pooler in transaction mode in front of postgres", "Quarry is safe in transaction mode"),
    ("which file formats can editors upload", "Formats: text and Markdown"),
    ("how big may one uploaded file be", "an uploaded file may be up to 50 MB"),
    ("if a worker dies halfway through embedding a long document, is the work lost", "Long work survives its own length"),
    ("which staff members can see which tenants in the admin", "Staff see only tenants where they are editors"),
    ("how do I find out why a cancelled document stopped", "the phase the work"),
    ("where do the development secret key and debug flag come from", "var/development.env"),
    ("how many connections do two web processes and one worker cluster need at most", "two web processes of 20"),
    ("where does the job queue live when redis is not configured", "Without `REDIS_URL` the queue lives in"),
    ("which benchmark compares pooling layouts", "measures all three"),
    ("how are spreadsheets split into passages", "groups of rows, each repeating the header row"),
    ("what does the supervisor do with leftover process groups from a run that was killed", "var/serve.json"),
]


def paragraphs(text: str) -> list[tuple[str, str]]:
    """``(section title, paragraph)`` of the prose: code blocks, tables and headings left out."""
    out: list[tuple[str, str]] = []
    section, block, fenced = "Quarry", [], False

    def flush() -> None:
        para = " ".join(line.strip() for line in block).strip()
        if len(para) >= 120:
            out.append((section, para))
        block.clear()

    for line in text.splitlines():
        if line.startswith("```"):
            flush()
            fenced = not fenced
            continue
        if fenced or line.startswith("|") or line.startswith("    "):
            flush()
            continue
        if line.startswith("#"):
            flush()
            section = line.lstrip("#").strip()
            continue
        if not line.strip():
            flush()
            continue
        block.append(line)
    flush()
    return out


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "var" / "readme-beir")
    text = subprocess.run(["git", "show", f"{COMMIT}:README.md"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    corpus = [{"_id": f"p{n}", "title": title, "text": para} for n, (title, para) in enumerate(paragraphs(text))]
    qrels = []
    for n, (_, marker) in enumerate(QUESTIONS):
        holders = [doc["_id"] for doc in corpus if marker in doc["text"]]
        if len(holders) != 1:
            raise SystemExit(f"question {n}: marker {marker!r} is in {len(holders)} paragraphs, not one")
        qrels.append((f"q{n}", holders[0]))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": f"q{n}", "text": q}) for n, (q, _) in enumerate(QUESTIONS)) + "\n", encoding="utf-8")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels), encoding="utf-8")
    print(json.dumps({"folder": str(folder), "documents": len(corpus), "queries": len(qrels)}))


if __name__ == "__main__":
    main()
