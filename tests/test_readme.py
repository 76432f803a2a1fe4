"""The README's commands work as shown, after `make run`'s set-up, with nothing typed in front of them.

Every ``.venv/bin/python manage.py ...`` line of the README's ``sh`` blocks runs in README
order, in a scratch data directory (its own development secret, as ``make run`` writes
it) and a scratch database, with neither DEBUG nor SECRET_KEY in the environment. Only
the example data paths are swapped for small folders this test builds (``DATA``); the
command lines are otherwise the README's own. The README's Python blocks run in
``manage.py shell``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import ROOT, scratch_database
from tests.test_knowledge_commands import write_beir

README = ROOT / "README.md"
# Example paths of the README -> what this test puts there (the commands stay the same otherwise).
DATA = {"docs/": "docs", "../shared/data/scifact": "beir"}


def readme_blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def manage_commands() -> list[str]:
    lines = []
    for block in readme_blocks("sh"):
        for line in block.splitlines():
            line = line.split("   #", 1)[0].strip()  # the README's trailing comments
            if line.startswith(".venv/bin/python manage.py "):
                lines.append(line)
    return lines


@pytest.fixture
def scratch(tmp_path: Path, db: None) -> Iterator[dict[str, str]]:
    """A data directory and a database of their own, set up as `make run` sets them up."""
    with scratch_database("quarry_readme") as url:
        env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "DATABASE_URL", "QUARRY_AUTH_MODE")}
        env.update(QUARRY_DATA_DIR=str(tmp_path / "var"), DATABASE_URL=url)
        done = subprocess.run([sys.executable, "-m", "config.prepare"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"make run's preparation failed:\n{done.stderr[-3000:]}"
        docs = tmp_path / "docs"
        docs.mkdir()
        (docs / "guide.md").write_text("# Guide\n\nResearch notes live in the research tenant.\n", encoding="utf-8")
        (docs / "notes.txt").write_text("Plain notes about the quarry's granite.\n", encoding="utf-8")
        (tmp_path / "beir").mkdir()
        write_beir(tmp_path / "beir")
        yield env


def test_the_readme_shows_its_management_commands() -> None:
    commands = manage_commands()
    assert any(" create_tenant " in c for c in commands) and any(" ingest " in c for c in commands)


def test_every_command_and_python_example_of_the_readme_works_as_shown(scratch: dict[str, str], tmp_path: Path) -> None:
    for line in manage_commands():
        argv = shlex.split(line)
        argv = [str(tmp_path / DATA[a]) if a in DATA else a for a in argv]
        argv[0] = sys.executable  # the same interpreter as .venv/bin/python in a fresh clone
        done = subprocess.run(argv, cwd=ROOT, env=scratch, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{line}\nfailed with {done.returncode}:\n{done.stderr[-3000:]}"
        if "--json" in argv:
            json.loads(done.stdout)  # what it prints is JSON, as the README says
        if " create_api_token " in line:
            assert re.fullmatch(r"qry_\S+", done.stdout.strip()), f"{line} printed {done.stdout!r}, not just the token"
    for block in readme_blocks("python"):  # after the commands: they create the tenants the examples use
        done = subprocess.run([sys.executable, "manage.py", "shell"], input=block, cwd=ROOT, env=scratch,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{block}\nfailed:\n{done.stderr[-3000:]}"
