"""Sources: sync throughput and what a re-sync costs. Prints JSON.

- web: a local site (tests/sites.py, a real HTTP server on 127.0.0.1) of ``--pages`` pages linking to
  each other; the first sync, then a re-sync after 1% of the pages changed: pages/s, seconds, and how
  many pages were fetched in full on the re-sync (target: only the changed ones, the rest answered 304).
- git: a repository of ``--files`` Markdown files made here with git; the first sync, then a re-sync
  after ``--changed`` files changed in one commit (target: under 10% of the first sync's seconds).

    .venv/bin/python bench/sources.py [--pages 2000] [--files 5000] [--changed 50]

The sync is measured end to end as the worker runs it (listing, conditional requests, fetching,
writing each changed item through the documents write door, deletions), with no crawl delay.
Extraction and embedding of the written documents are the document workers' work, queued by the
sync and measured by bench/ingest.py; the queue entries this run adds are removed afterwards.
Runs against the configured database (the embedded one unless DATABASE_URL is set), in a throwaway tenant.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, bench_tenant, emit, setup_django


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "Bench",
           "GIT_COMMITTER_EMAIL": "b@example.com", "HOME": str(repo), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def page_text(n: int, edition: int = 0) -> str:
    return (f"Page {n} of the handbook, edition {edition}. It explains topic {n % 97} and links to its neighbours. "
            "Harbour pilots read these pages before every shift. ") * 4


def timed_sync(source: object) -> tuple[float, object]:
    from knowledge.sources.services.syncing import source_sync_request, source_sync_run

    source_sync_request(source=source, trigger="manual")  # type: ignore[arg-type]
    start = time.perf_counter()
    sync = source_sync_run(source_pk=source.pk)  # type: ignore[attr-defined]
    return time.perf_counter() - start, sync


def counts(sync: object) -> dict[str, int]:
    return {k: getattr(sync, k) for k in ("listed", "added", "updated", "unchanged", "deleted", "failed")}


def bench_web(tenant: object, pages: int) -> dict[str, object]:
    sys.path.insert(0, str(ROOT))
    from knowledge.sources.services.editing import source_create
    from tests.sites import local_site

    with local_site() as site:
        for n in range(pages):
            links = [f"/p/{m}" for m in (2 * n + 1, 2 * n + 2, n + 1) if m < pages]
            site.html(f"/p/{n}", f"Page {n}", page_text(n), tuple(links))
        site.html("/", "Handbook", "The start page.", ("/p/0",))
        source = source_create(tenant=tenant, name="Bench site", kind="web", actor="bench", probe=False,  # type: ignore[arg-type]
                               config={"url": f"{site.base}/", "delay_seconds": 0, "max_pages": pages + 10})
        first_seconds, first = timed_sync(source)
        changed = max(1, pages // 100)
        for n in range(0, pages, pages // changed)[:changed]:
            site.html(f"/p/{n}", f"Page {n}", page_text(n, edition=1), tuple(f"/p/{m}" for m in (2 * n + 1, 2 * n + 2, n + 1) if m < pages))
        site.log.clear()
        again_seconds, again = timed_sync(source)
        full = [p for p in site.full_fetches() if p != "/robots.txt"]
        conditional = sum(1 for _, _, status, _ in site.log if status == 304)
    return {
        "pages": pages + 1,
        "first_sync": {"seconds": round(first_seconds, 2), "pages_per_s": round((pages + 1) / first_seconds, 1), **counts(first)},
        "resync_1pct_changed": {"changed_pages": changed, "seconds": round(again_seconds, 2),
                                "pages_per_s": round((pages + 1) / again_seconds, 1), "fetched_in_full": len(full),
                                "answered_304": conditional, **counts(again)},
    }


def bench_git(tenant: object, files: int, changed: int) -> dict[str, object]:
    from knowledge.sources.services.editing import source_create

    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder) / "repo"
        repo.mkdir()
        git(repo, "init", "--quiet", "--initial-branch=main")
        for n in range(files):
            path = repo / f"docs/section-{n % 50}/page-{n}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# Page {n}\n\n{page_text(n)}\n")
        git(repo, "add", ".")
        git(repo, "commit", "--quiet", "-m", "first")
        source = source_create(tenant=tenant, name="Bench repo", kind="git", actor="bench", probe=False,  # type: ignore[arg-type]
                               config={"url": repo.as_uri(), "branch": "main"})
        first_seconds, first = timed_sync(source)
        for n in range(0, files, files // changed)[:changed]:
            (repo / f"docs/section-{n % 50}/page-{n}.md").write_text(f"# Page {n}\n\n{page_text(n, edition=1)}\n")
        git(repo, "commit", "--quiet", "-am", "second")
        again_seconds, again = timed_sync(source)
    return {
        "files": files,
        "first_sync": {"seconds": round(first_seconds, 2), "files_per_s": round(files / first_seconds, 1), **counts(first)},
        "resync": {"changed_files": changed, "seconds": round(again_seconds, 2), **counts(again)},
        "resync_share_of_first": round(again_seconds / first_seconds, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--changed", type=int, default=50)
    args = parser.parse_args()
    setup_django()
    from django.conf import settings
    from django_q.models import OrmQ

    with tempfile.TemporaryDirectory() as media:
        settings.MEDIA_ROOT = media  # the uploads the sync stores: thrown away with the run
        settings.QUARRY_SOURCE_WORK_DIR = str(Path(media) / "work")
        queued_before = OrmQ.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        try:
            with bench_tenant("bench-sources") as tenant:
                result = {"web": bench_web(tenant, args.pages), "git": bench_git(tenant, args.files, args.changed)}
        finally:
            OrmQ.objects.filter(pk__gt=queued_before).delete()  # this run's document tasks: their documents are gone
    emit(result)


if __name__ == "__main__":
    main()
