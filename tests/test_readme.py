"""The README's commands and examples work as shown, after `make run`, with nothing typed in front of them.

`make run`'s steps run first, in a scratch data directory (its own development secret, as
``make run`` writes it) and a scratch database, with neither DEBUG nor SECRET_KEY in the
environment; then its last step, ``python -m config.serve`` (the web server and a worker
cluster), on a free port. Every ``sh`` block of the README then runs, in README order, as one
bash script (so ``S=...`` of one block is the session of the next, as in a user's shell),
with ``TOKEN`` set to the token ``make run`` printed. Only three things are swapped in the
text: the server's address (``http://127.0.0.1:8000`` -> the free port), ``.venv/bin/python``
(-> this interpreter, the same one in a fresh clone), and the data paths of ``DATA`` (a BEIR
collection this test builds, a scratch output folder). Every command must succeed: bash
stops at the first one that fails (``set -euo pipefail``) and curl fails on any HTTP error
(``--fail-with-body``), so the failing line is in the message. Every README Python block is
a file under ``examples/`` and runs as a plain script, as the README says to run it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import ROOT, free_port, process, read_log, scratch_database, wait_for
from tests.test_knowledge_commands import write_beir

README = ROOT / "README.md"
README_BASE = "http://127.0.0.1:8000"
# Data paths of the README -> what this test puts there, under its tmp_path.
DATA = {"../shared/data/scifact": "beir", "var/judged": "judged"}
# Every curl of the README fails on an HTTP error status, and bash stops at the first failure; -x
# names the failing command in the log.
# The README starts servers in the background (a local site, an S3 server): they go when the script ends,
# or they would hold its output open and the test would wait for them.
PRELUDE = """set -euo pipefail -x
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
curl() { command curl --fail-with-body --show-error --max-time 300 "$@"; }
"""


def readme_blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


# A block that runs make itself, possibly with settings in front (``QUARRY_X=... make run``): this test
# does make run's steps, with those settings.
MAKE_LINE = re.compile(r"^((?:[A-Z][A-Z0-9_]*=\S+\s+)*)make \w+\s*(?:#.*)?$")


def is_make_block(block: str) -> bool:
    return all(MAKE_LINE.match(line.strip()) for line in block.strip().splitlines())


def readme_script() -> str:
    """The README's ``sh`` blocks in order, without the blocks that run make itself (this test does its steps)."""
    return "\n".join(block for block in readme_blocks("sh") if not is_make_block(block))


def make_run_settings() -> dict[str, str]:
    """The settings the README puts in front of ``make run`` (``$PWD`` is the checkout, where the README runs)."""
    found: dict[str, str] = {}
    for block in filter(is_make_block, readme_blocks("sh")):
        for line in block.strip().splitlines():
            for assignment in MAKE_LINE.match(line.strip()).group(1).split():  # type: ignore[union-attr]
                name, _, value = assignment.partition("=")
                found[name] = value.replace("$PWD", str(ROOT))
    return found


def manage_commands() -> list[str]:
    return [line.strip() for line in readme_script().splitlines() if ".venv/bin/python manage.py " in line]


@pytest.fixture
def scratch(tmp_path: Path, db: None) -> Iterator[dict[str, str]]:
    """A data directory and a database of their own, set up as `make run` sets them up."""
    with scratch_database("quarry_readme") as url:
        env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "DATABASE_URL", "QUARRY_AUTH_MODE")}
        env.update(QUARRY_DATA_DIR=str(tmp_path / "var"), DATABASE_URL=url, QUARRY_WORKERS="1", REDIS_URL="")
        done = subprocess.run([sys.executable, "-m", "config.prepare"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"make run's preparation failed:\n{done.stderr[-3000:]}"
        (tmp_path / "beir").mkdir()
        write_beir(tmp_path / "beir")
        yield env


@pytest.fixture
def served(scratch: dict[str, str]) -> Iterator[str]:
    """`make run`'s last step, ``python -m config.serve``, on a free port; yields its base URL once the
    web server answers and the worker cluster runs."""
    port = free_port()
    env = {**scratch, **make_run_settings(), "PORT": str(port)}
    with process([sys.executable, "-m", "config.serve"], env, "readme-serve") as proc:
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"make run's server stopped:\n{read_log('readme-serve')[-3000:]}")
            try:
                return httpx.get(f"{base}/healthz", timeout=2).status_code == 200 and "] running." in read_log("readme-serve")
            except httpx.TransportError:
                return False

        wait_for(up, timeout=180, what="make run's web server and worker cluster")
        yield base


def test_the_readme_shows_its_commands() -> None:
    commands = manage_commands()
    assert any(" create_tenant " in c for c in commands) and any(" ingest " in c for c in commands)
    assert "/v1/documents/upload" in readme_script() and "/v1/agent/runs/" in readme_script()


def test_every_command_and_python_example_of_the_readme_works_as_shown(scratch: dict[str, str], served: str, tmp_path: Path) -> None:
    script = readme_script().replace(README_BASE, served).replace(".venv/bin/python ", f"{sys.executable} ")
    for shown, ours in DATA.items():
        script = script.replace(shown, str(tmp_path / ours))
    token = json.loads((Path(scratch["QUARRY_DATA_DIR"]) / "demo.json").read_text())["token"]
    done = subprocess.run(["bash", "-c", PRELUDE + script], cwd=ROOT, env={**scratch, "TOKEN": token},
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"a README command failed with {done.returncode}:\n{done.stderr[-5000:]}"
    # What the README shows them answering (what `tee /dev/stderr` shows goes to stderr).
    shown = (done.stdout + done.stderr).replace(" ", "")
    assert '"document_ids":["vpn-guide"]' in shown and '"document_ids":["expenses.txt"]' in shown
    assert "event:completed" in shown and '"stop_reason":"completed"' in shown and '"title":"VPNquestions"' in shown
    for block in readme_blocks("python"):  # after the commands: they create the tenants the examples use
        example = example_file(block)
        # As a user runs it: a plain script (no manage.py shell), from another working directory.
        ran = subprocess.run([sys.executable, str(example)], cwd=tmp_path, env=scratch, capture_output=True, text=True, timeout=600)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, f"{example}\nfailed:\n{ran.stderr[-3000:]}"


def example_file(block: str) -> Path:
    """The file under examples/ that a README Python block shows, verbatim (the README says to run it)."""
    for path in sorted((ROOT / "examples").glob("*.py")):
        if path.read_text(encoding="utf-8") == block:
            return path
    raise AssertionError(f"this README Python block is not a file under examples/ (ship it there, verbatim):\n{block[:500]}")


def test_every_readme_python_block_is_a_shipped_example() -> None:
    blocks = readme_blocks("python")
    assert blocks and all(example_file(block).is_file() for block in blocks)
