"""``manage.py evaluate ... --rerank colbert --json`` with the stage's cache filled first; prints its JSON (issue 36).

    .venv/bin/python bench/rerank_eval.py --vectors var/colbert-scifact.npz -- \
        ../shared/data/scifact --tenant scifact --modes hybrid --fusions score --rerank colbert --json

The arguments after ``--`` are the command's. Passage vectors that ``bench/colbert_vectors.py``
encoded are put in the process's re-ranker cache (``QUARRY_RERANK_CACHE_MB`` must hold them), so the
evaluation measures quality without re-encoding every candidate on this shared machine; the
stage's latency here is then the warm one (``bench/rerank_latency.py`` measures cold and warm).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from _common import setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", action="append", default=[], type=Path)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    setup_django()
    from django.core.management import call_command

    from knowledge import rag

    model = rag.reranker()
    assert model is not None
    loaded = 0
    for path in args.vectors:
        with np.load(path) as saved:
            for key in saved.files:
                vector = saved[key]
                model._cache[key] = vector
                model._cache_used += vector.nbytes
                loaded += 1
    print(f"{loaded} passages' vectors in the cache ({model._cache_used / 2**20:.0f} MB)", file=sys.stderr)
    call_command("evaluate", *[a for a in args.command if a != "--"])


if __name__ == "__main__":
    main()
