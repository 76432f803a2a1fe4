"""The development environment file that ``make run`` writes, so the README's commands work as shown.

``make run`` runs ``python -m config.development``, which writes ``var/development.env``
(once; mode 0600) with ``DEBUG=1`` and a random ``SECRET_KEY``. ``manage.py`` reads it
only when neither ``DEBUG`` nor ``SECRET_KEY`` is set in the environment, so any
explicit configuration wins, and a deployment (which must set ``SECRET_KEY``) never
sees it. Delete ``var/`` to forget it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import MutableMapping
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent


def env_file(environ: MutableMapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("QUARRY_DATA_DIR") or BASE_DIR / "var") / "development.env"


def load_development_env(environ: MutableMapping[str, str] | None = None) -> bool:
    """Fill ``environ`` from the development file when DEBUG and SECRET_KEY are both unset; True if it did."""
    env = os.environ if environ is None else environ
    path = env_file(env)
    if "DEBUG" in env or "SECRET_KEY" in env or not path.is_file():
        return False
    for line in path.read_text(encoding="utf-8").splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() and not line.lstrip().startswith("#"):
            env.setdefault(name.strip(), value.strip())
    return True


def write_development_env(environ: MutableMapping[str, str] | None = None) -> Path:
    """Create the development file unless it exists; returns its path."""
    path = env_file(environ)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(
                "# Written by `make run` for development only; manage.py reads it when DEBUG and SECRET_KEY are unset.\n"
                f"DEBUG=1\nSECRET_KEY={secrets.token_urlsafe(50)}\n"
            )
    return path


if __name__ == "__main__":
    write_development_env()
