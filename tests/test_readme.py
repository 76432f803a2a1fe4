"""The README's commands work as shown, after `make run`'s set-up, with nothing typed in front of them.

Every ``.venv/bin/python manage.py ...`` line of the README's ``sh`` blocks runs in README
order, in a scratch data directory (its own development secret, as ``make run`` writes
it) and a scratch database, with neither DEBUG nor SECRET_KEY in the environment. The
example files are the checkout's own (``examples/``); only the BEIR collection's path is
swapped for a small folder this test builds (``DATA``). Every README Python block is a
file under ``examples/`` and runs as a plain script, as the README says to run it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.servers import ROOT, database_url
from tests.test_knowledge_commands import write_beir

README = ROOT / "README.md"
# Example paths of the README -> what this test puts there (the commands stay the same otherwise).
DATA = {"../shared/data/scifact": "beir"}


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
    name = f"quarry_readme_{uuid.uuid4().hex[:8]}"
    admin_url = database_url()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "DATABASE_URL", "QUARRY_AUTH_MODE")}
    env.update(QUARRY_DATA_DIR=str(tmp_path / "var"), DATABASE_URL=admin_url.rsplit("/", 1)[0] + f"/{name}")
    try:
        for step in (["-m", "config.development"], ["manage.py", "migrate", "--noinput", "--verbosity", "0"],
                     ["manage.py", "demo_setup", "--quiet"], ["manage.py", "demo_corpus"]):
            done = subprocess.run([sys.executable, *step], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"make run's step {step} failed:\n{done.stderr[-3000:]}"
        (tmp_path / "beir").mkdir()
        write_beir(tmp_path / "beir")
        yield env
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


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
        script = example_file(block)
        # As a user runs it: a plain script (no manage.py shell), from another working directory.
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=scratch, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{script}\nfailed:\n{done.stderr[-3000:]}"


def example_file(block: str) -> Path:
    """The file under examples/ that a README Python block shows, verbatim (the README says to run it)."""
    for path in sorted((ROOT / "examples").glob("*.py")):
        if path.read_text(encoding="utf-8") == block:
            return path
    raise AssertionError(f"this README Python block is not a file under examples/ (ship it there, verbatim):\n{block[:500]}")


def test_every_readme_python_block_is_a_shipped_example() -> None:
    blocks = readme_blocks("python")
    assert blocks and all(example_file(block).is_file() for block in blocks)
