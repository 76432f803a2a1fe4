"""What reading a conversation back costs as it grows (issue 19: conversations became trees), as JSON.

    .venv/bin/python bench/chat_thread.py [--turns 200,2000] [--repeat 50]

For each size, one session of that many stored turns (exchanges written by ``chat_exchange_record``),
then p50/p95 of ``chat_transcript`` (the conversation as the page and the API read it, at most 200
turns) and of ``chat_memory`` (the two turns a new question carries) over ``--repeat`` calls.
Only the public functions both the straight-list and the tree layout have are called, so the
script measures either (run it on the commit before threads for the before-figure).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
import sys

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import bench_tenant, setup_django  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", default="200,2000")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    setup_django()
    from chat.selectors import chat_memory, chat_transcript
    from chat.services import chat_exchange_record, chat_session_create

    report: dict[str, object] = {"repeat": args.repeat, "sizes": {}}
    with bench_tenant("bench-chat-thread") as tenant:
        for size in (int(n) for n in args.turns.split(",")):
            session = chat_session_create(tenant=tenant, principal="bench")
            for n in range(size // 2):
                chat_exchange_record(session=session, prompt=f"Question {n} about uploads and workers?",
                                     answer=f"Answer {n}: editors upload files in the admin [1]. " * 4,
                                     citations=[{"document_id": "guide", "chunk_id": "guide:0", "score": 0.5}],
                                     usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}, model="bench/model")
            timings: dict[str, list[float]] = {"transcript_ms": [], "memory_ms": []}
            for _ in range(args.repeat):
                started = time.perf_counter()
                transcript = chat_transcript(session=session)
                timings["transcript_ms"].append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                chat_memory(session=session, limit=2)
                timings["memory_ms"].append((time.perf_counter() - started) * 1000)
            report["sizes"][str(size)] = {  # type: ignore[index]
                "shown_turns": len(transcript["turns"]),
                **{f"{name}_p50": round(statistics.median(v), 2) for name, v in timings.items()},
                **{f"{name}_p95": round(sorted(v)[int(0.95 * (len(v) - 1))], 2) for name, v in timings.items()},
            }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
