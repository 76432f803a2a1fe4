"""OCR throughput and accuracy: scanned pages through ``knowledge.extraction.extract``. Prints JSON.

Pages of real prose (one SciFact abstract each) are printed by headless Chromium, rasterized by
pdfium at the scan resolution (an image-only PDF, as a scanner makes), and extracted
the way an upload is: pdfium renders each page at the OCR resolution and Tesseract reads
it. Reported: pages per second over the whole file, seconds per page (from the progress
callback), CPU seconds per page (this process and Tesseract, so a busy machine does not
skew it), and the character error rate against the printed text.

    .venv/bin/python bench/ocr.py [--pages 6] [--scan-dpi 150]

Needs /usr/bin/chromium and tesseract (``make setup`` / ``make test`` install them).
"""

from __future__ import annotations

import argparse
import html
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, emit

sys.path.insert(0, str(ROOT))

from knowledge.extraction import extract  # noqa: E402 - needs the path above
from knowledge.extraction.ocr import OCR_LANGUAGES, tesseract_version  # noqa: E402
from knowledge.extraction.pdf import OCR_DPI  # noqa: E402


def abstracts(count: int) -> list[str]:
    """``count`` SciFact abstracts of 150-260 words (about two thirds of a printed page):
    real English with numbers and names, as documents have. A worktree finds the shared
    data a level further up than the main checkout does."""
    for base in (ROOT.parent, ROOT.parent.parent):
        corpus = base / "shared" / "data" / "scifact" / "corpus.jsonl"
        if corpus.exists():
            break
    else:
        raise SystemExit("shared/data/scifact/corpus.jsonl not found beside this checkout")
    out = []
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            text = " ".join(json.loads(line)["text"].split())
            if 150 <= len(text.split()) <= 260:
                out.append(text)
                if len(out) == count:
                    break
    return out


def printed_pages(texts: list[str], directory: Path) -> bytes:
    # One abstract per page. No numbered headings: "Section 3" on top of page 3 is
    # exactly what a running header looks like, and would rightly be removed.
    body = "".join(
        f'<p style="page-break-before: {"always" if n else "auto"}">{html.escape(text)}</p>' for n, text in enumerate(texts)
    )
    page = directory / "bench.html"
    page.write_text(f"<!doctype html><html><head><title>OCR bench</title></head><body style='font-size:14px'>{body}</body></html>")
    out = directory / "bench.pdf"
    subprocess.run(
        ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={directory / 'profile'}", f"--print-to-pdf={out}", page.as_uri()],
        capture_output=True, timeout=180, check=True,
    )
    return out.read_bytes()


def scanned(pdf: bytes, dpi: int) -> bytes:
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(pdf)
    images = [document[i].render(scale=dpi / 72, grayscale=True).to_pil().convert("L") for i in range(len(document))]
    document.close()
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=dpi, save_all=True, append_images=images[1:])
    return out.getvalue()


def cer(got: str, expected: str) -> float:
    """Character error rate (whitespace runs as one space), by a banded edit distance:
    exact while the distance stays under the band (5% of the text plus the length
    difference), an upper bound past it; a full table would be quadratic in 10k characters."""
    a, b = " ".join(got.split()), " ".join(expected.split())
    n, m = len(a), len(b)
    band = abs(n - m) + max(64, max(n, m) // 20)
    far = n + m
    previous = [j if j <= band else far for j in range(m + 1)]
    for i in range(1, n + 1):
        current = [far] * (m + 1)
        if i <= band:
            current[0] = i
        for j in range(max(1, i - band), min(m, i + band) + 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] != b[j - 1]))
        previous = current
    return min(previous[m], far) / max(1, m)


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=6, help="pages in the scanned file")
    parser.add_argument("--scan-dpi", type=int, default=150, help="resolution of the scanned images")
    args = parser.parse_args()

    texts = abstracts(args.pages)
    with tempfile.TemporaryDirectory() as tmp:
        printed = printed_pages(texts, Path(tmp))
    scan = scanned(printed, args.scan_dpi)
    marks: list[float] = []
    cpu_before = _cpu_seconds()
    started = time.perf_counter()
    result = extract(scan, filename="bench.pdf", progress=lambda done, total: marks.append(time.perf_counter()))
    seconds = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu_before
    per_page = [b - a for a, b in zip([started, *marks], marks)]
    expected = " ".join(texts)
    emit({
        "bench": "ocr",
        "engine": tesseract_version(),
        "languages": OCR_LANGUAGES,
        "pages": result.pages,
        "pages_ocr": len(marks),
        "scan_dpi": args.scan_dpi,
        "ocr_dpi": OCR_DPI,
        "cores": os.cpu_count(),
        "seconds": round(seconds, 2),
        "pages_per_second": round(len(marks) / seconds, 3),
        "seconds_per_page_p50": round(statistics.median(per_page), 2),
        "seconds_per_page_max": round(max(per_page), 2),
        # CPU time (this process and Tesseract's) does not depend on what else the cores run.
        "cpu_seconds_per_page": round(cpu / max(1, len(marks)), 2),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "characters": len(result.text),
        "cer": round(cer(result.text, expected), 4),
    })


if __name__ == "__main__":
    main()
