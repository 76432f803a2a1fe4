"""A document at the bounds, end to end through a real django-q2 worker with the local embedder,
uninterrupted and with its worker killed half-way. Prints JSON.

    .venv/bin/python bench/long_document.py [--chars 10000000] [--lease 10] [--skip-killed]

``uninterrupted``: a pasted document of ``--chars`` characters of distinct text (windows of real
abstracts, each numbered) is saved, a one-worker cluster (``manage.py qcluster``) is started, and
the clock runs until the document is ``ready``: seconds, chunks per second, the worker's peak RSS
(the largest ``VmHWM`` of the cluster's processes), and the seconds spent in each phase as the
live list saw them.

``killed_at_50``: another document of the same size (other text, so nothing is re-used from the
first), the cluster SIGKILLed (the whole process group) once half the texts are embedded, the
lease left to lapse (``--lease`` seconds, the worker's setting for this run), the reclaim task run
as its every-minute schedule would, and a new cluster started: total seconds from the first start
to ``ready``, against the uninterrupted run (``overhead_percent``), and how many texts the resumed
run embedded and re-used.

Runs against the configured database (the embedded one unless DATABASE_URL is set), in throwaway
tenants deleted afterwards. The machine's other load counts: run it on an idle machine for the
figures of record.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

from _common import ROOT, bench_tenant, emit, passages, setup_django


def long_text(chars: int, seed: int) -> str:
    """``chars`` characters of distinct paragraphs: numbered windows of real text."""
    parts: list[str] = []
    size = 0
    n = 0
    while size < chars:
        for window in passages(2000, words_per=150, seed=seed * 1_000_003 + n):
            paragraph = f"Section {seed}.{n}. {window}"
            parts.append(paragraph)
            size += len(paragraph) + 2
            n += 1
            if size >= chars:
                break
    return "\n\n".join(parts)[:chars]


def database_url() -> str:
    from django.db import connection

    s = connection.settings_dict
    host = s["HOST"] or "localhost"
    host_part = quote(host, safe="") if host.startswith("/") else host
    port = f":{s['PORT']}" if s.get("PORT") else ""
    password = f":{quote(s['PASSWORD'], safe='')}" if s.get("PASSWORD") else ""
    return f"postgresql://{quote(s['USER'] or '', safe='')}{password}@{host_part}{port}/{s['NAME']}"


def start_cluster(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    handle = open(log, "ab")  # noqa: SIM115 - lives as long as the cluster
    return subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=env, stdout=handle,
                            stderr=subprocess.STDOUT, start_new_session=True)


def kill_cluster(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def peak_rss_mb(proc: subprocess.Popen[bytes]) -> float:
    """The largest peak resident set (VmHWM) among the cluster's processes, in MB."""
    import psutil

    try:
        members = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    peak = 0
    for member in members:
        try:
            with open(f"/proc/{member.pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            continue
    return round(peak / 1024, 1)


def watch(pk: int, proc: subprocess.Popen[bytes], *, until_half: bool = False, timeout: float = 7200) -> dict[str, object]:
    """Poll the document until ready/failed (or half embedded): phases seen, their seconds, peak RSS."""
    from knowledge.models import Document

    phases: dict[str, float] = {}
    last_phase, last_at = None, time.perf_counter()
    peak = 0.0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = Document.objects.filter(pk=pk).values("status", "phase", "phase_done", "phase_total", "error").get()
        now = time.perf_counter()
        phase = row["phase"] or row["status"]
        if phase != last_phase:
            if last_phase is not None:
                phases[last_phase] = round(phases.get(last_phase, 0.0) + now - last_at, 1)
            last_phase, last_at = phase, now
        peak = max(peak, peak_rss_mb(proc))
        if row["status"] in ("ready", "failed"):
            return {"status": row["status"], "error": row["error"], "phases_seconds": phases, "peak_rss_mb": peak}
        if until_half and row["phase"] == "embedding" and row["phase_total"] and row["phase_done"] >= row["phase_total"] / 2:
            return {"status": "half", "phases_seconds": phases, "peak_rss_mb": peak,
                    "done": row["phase_done"], "total": row["phase_total"]}
        if proc.poll() is not None:
            raise RuntimeError(f"the cluster exited with {proc.returncode}")
        time.sleep(0.25)
    raise TimeoutError("the document did not finish in time")


def run_uninterrupted(tenant: object, text: str, env: dict[str, str], log: Path) -> dict[str, object]:
    from knowledge.models import Document
    from knowledge.services import documents as doc_services

    document = doc_services.document_text_save(tenant=tenant, external_id="long", text=text, actor="bench")  # type: ignore[arg-type]
    started = time.perf_counter()
    proc = start_cluster(env, log)
    try:
        seen = watch(document.pk, proc)
        seconds = time.perf_counter() - started  # the cluster's own shutdown is not the document's time
    finally:
        kill_cluster(proc, signal.SIGTERM)
    done = Document.objects.get(pk=document.pk)
    return {"characters": len(text), "chunks": done.chunk_count, "status": seen["status"], "error": seen.get("error") or None,
            "seconds": round(seconds, 1), "chunks_per_s": round(done.chunk_count / seconds, 1),
            "worker_peak_rss_mb": seen["peak_rss_mb"], "phases_seconds": seen["phases_seconds"]}


def run_killed(tenant: object, text: str, env: dict[str, str], lease: int, log: Path) -> dict[str, object]:
    from django.utils import timezone

    from knowledge.models import Document, EmbeddingCache
    from knowledge.services import documents as doc_services
    from knowledge.services import reclaim

    document = doc_services.document_text_save(tenant=tenant, external_id="long-killed", text=text, actor="bench")  # type: ignore[arg-type]
    started = time.perf_counter()
    first = start_cluster(env, log)
    try:
        half = watch(document.pk, first, until_half=True)
    finally:
        kill_cluster(first)
    killed_after = time.perf_counter() - started
    stored = EmbeddingCache.objects.filter(tenant=tenant).count()
    # The lease lapses; then the reclaim task (every minute in production) re-queues the document.
    while Document.objects.filter(pk=document.pk, lease_expires_at__gt=timezone.now()).exists():
        time.sleep(0.2)
    requeued = reclaim.documents_reclaim().requeued
    second = start_cluster(env, log)
    try:
        seen = watch(document.pk, second)
        seconds = time.perf_counter() - started
    finally:
        kill_cluster(second, signal.SIGTERM)
    line = re.findall(rf"document {document.pk} \(long-killed\): embedded (\d+) of (\d+) texts; (\d+) re-used", log.read_text(errors="replace"))
    embedded, total, reused = map(int, line[-1]) if line else (None, None, None)
    return {"status": seen["status"], "error": seen.get("error") or None, "seconds": round(seconds, 1),
            "killed_after_seconds": round(killed_after, 1), "killed_at": f"{half['done']} / {half['total']}",
            "vectors_stored_at_kill": stored, "requeued": requeued,
            "resumed_run_embedded": embedded, "resumed_run_reused": reused, "texts": total,
            "worker_peak_rss_mb": max(float(half["peak_rss_mb"]), float(seen["peak_rss_mb"]))}  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=10_000_000)
    parser.add_argument("--lease", type=int, default=10, help="QUARRY_DOCUMENT_LEASE_SECONDS of the bench's workers")
    parser.add_argument("--skip-killed", action="store_true")
    args = parser.parse_args()
    setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    env = {**os.environ, "DATABASE_URL": database_url(), "QUARRY_WORKERS": "1", "QUARRY_DOCUMENT_LEASE_SECONDS": str(args.lease),
           "REDIS_URL": ""}
    log = ROOT / "var" / "bench-long-document.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    result: dict[str, object] = {"embedder": "local (all-MiniLM-L6-v2, int8 ONNX, CPU)", "cores": os.cpu_count(),
                                 "lease_seconds": args.lease, "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    with bench_tenant("bench-long-document") as tenant:
        result["uninterrupted"] = run_uninterrupted(tenant, long_text(args.chars, seed=1), env, log)
    if not args.skip_killed:
        with bench_tenant("bench-long-killed") as tenant:
            killed = run_killed(tenant, long_text(args.chars, seed=2), env, args.lease, log)
        base = float(result["uninterrupted"]["seconds"])  # type: ignore[index]
        killed["overhead_percent"] = round(100 * (float(killed["seconds"]) - base) / base, 1)  # type: ignore[arg-type]
        result["killed_at_50"] = killed
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    emit(result)


if __name__ == "__main__":
    main()
