"""Git sources: any URL the ``git`` program can clone (https, ssh, a local path or ``file://``).

The connector keeps a bare mirror in its work folder and fetches the branch on every sync. Each
file's version token is its blob id, so a re-sync fetches exactly the files whose content differs
between the last indexed commit and the new head: a rename is the old path deleted and the new
path added (its blob read once), a deletion is a path no longer listed. ``uri_template`` (e.g.
``https://git.example.com/org/repo/blob/{commit}/{path}``) gives each document the hosting site's
page; without it the URI is ``<url>#<path>``.
"""

from __future__ import annotations

import mimetypes
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from knowledge.sources.connectors.base import (
    Content, Context, ConfigError, Item, ItemError, Known, ListingError, PathFilter, refuse_blocked_url, refuse_unknown, string_list, text,
)
from knowledge.sources.connectors.folder import path_under_roots

GIT_TIMEOUT_SECONDS = 600  # a first clone of a large repository; a hung server must not hold the sync forever
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]{1,200}$")
_URL = re.compile(r"^(https?://|ssh://|git://|file://|/|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:)")


def _check_local(url: str) -> None:
    """Refuse a repository on this server's disk outside ``QUARRY_SOURCE_FOLDER_ROOTS``.

    A ``file://`` URL or a path reads whatever the server's user can read: without this, any editor
    could index a repository a folder source may not name (a deployment's configuration, another
    checkout), so local repositories obey the folder sources' roots. Remote URLs are not affected."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        raw = unquote(parts.path)
    elif url.startswith("/"):
        raw = url
    else:
        return
    path_under_roots(raw, "config.url", off="repositories on this server are turned off: the server sets no "
                                            "QUARRY_SOURCE_FOLDER_ROOTS (a remote URL, https:// or ssh://, needs none)")


class GitConnector:
    kind: ClassVar[str] = "git"
    secret_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:
        refuse_unknown(config, ("url", "branch", "include", "exclude", "uri_template"))
        url = text(config, "url", required=True)
        if not _URL.match(url) or url.startswith("-"):
            raise ConfigError("config.url", "must be a URL git can clone: https://, ssh://, git://, file://, user@host:path or an absolute path")
        _check_local(url)
        if re.match(r"^(https?|ssh|git)://", url):
            refuse_blocked_url(url, "config.url")
        branch = text(config, "branch", default="")
        if branch and not _BRANCH.fullmatch(branch):
            raise ConfigError("config.branch", "is not a branch name")
        template = text(config, "uri_template", default="")
        if template:
            try:
                template.format(commit="c", path="p")
            except (KeyError, IndexError, ValueError):
                raise ConfigError("config.uri_template", "may use only {commit} and {path}") from None
        return {"url": url, "branch": branch, "include": string_list(config, "include"), "exclude": string_list(config, "exclude"),
                "uri_template": template}

    def __init__(self, config: Mapping[str, Any], secrets: Mapping[str, str], context: Context) -> None:
        self.url = config["url"]
        self.branch = config.get("branch") or ""
        self.template = config.get("uri_template") or ""
        self.context = context
        self.filter = PathFilter(tuple(config.get("include") or ()), tuple(config.get("exclude") or ()), context.default_suffixes)
        self.mirror = context.workdir / "mirror.git"
        self.head = ""
        self.reader: subprocess.Popen[bytes] | None = None  # one `git cat-file --batch` for the whole sync

    def _git(self, *args: str, input: bytes | None = None) -> bytes:
        # No prompt may ever wait for a password on a worker; GIT_TERMINAL_PROMPT=0 makes git fail instead.
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
        done = subprocess.run(["git", *args], input=input, capture_output=True, timeout=GIT_TIMEOUT_SECONDS, env=env, check=False)
        if done.returncode:
            raise subprocess.CalledProcessError(done.returncode, args, done.stdout, done.stderr)
        return done.stdout

    def probe(self) -> None:
        try:
            refs = self._git("ls-remote", "--symref", "--", self.url, f"refs/heads/{self.branch}" if self.branch else "HEAD")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise ConfigError("config.url", f"git cannot read the repository: {_reason(exc)}") from None
        if not refs.strip():
            raise ConfigError("config.branch", f"the repository has no branch {self.branch!r}" if self.branch else "the repository is empty")

    def _update_mirror(self) -> str:
        """Fetch the branch into the mirror; returns the head commit."""
        try:
            _check_local(self.url)  # again at each sync: the roots may have changed since the source was made
        except ConfigError as exc:
            raise ListingError(f"{self.url}: {exc.message}; nothing was fetched") from None
        ref = f"refs/heads/{self.branch}" if self.branch else "HEAD"
        if not (self.mirror / "HEAD").exists():
            self.context.workdir.mkdir(parents=True, exist_ok=True)
            self._git("init", "--bare", "--quiet", str(self.mirror))
        # One local ref per sync; --force: a rewritten history is followed, not refused.
        self._git("-C", str(self.mirror), "fetch", "--quiet", "--force", "--no-tags", "--depth=1", "--", self.url, f"+{ref}:refs/quarry/head")
        return self._git("-C", str(self.mirror), "rev-parse", "refs/quarry/head^{commit}").decode().strip()

    def list_items(self, known: Mapping[str, Known], cursor: Mapping[str, Any]) -> Iterator[Item]:
        try:
            self.head = self._update_mirror()
            listing = self._git("-C", str(self.mirror), "ls-tree", "-r", "-z", "--full-tree", self.head)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            raise ListingError(f"git could not fetch {self.url}: {_reason(exc)}") from None
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, _, raw_path = entry.partition(b"\t")
            mode, kind, blob = meta.decode().split()
            if kind != "blob" or mode == "120000":  # submodules and symlinks are not content
                continue
            path = raw_path.decode("utf-8", "surrogateescape")
            if self.filter.wanted(path):
                yield Item(path=path, version=blob, uri=self._uri(path), extra={"blob": blob})

    def _uri(self, path: str) -> str:
        return self.template.format(commit=self.head, path=path) if self.template else f"{self.url}#{path}"

    def fetch(self, item: Item) -> Content:
        blob = str(item.extra["blob"])
        size, data = self._read_blob(blob)
        if data is None:
            raise ItemError(f"{size:,} bytes, over the limit of {self.context.max_item_bytes:,} bytes per item")
        name = item.path.rsplit("/", 1)[-1]
        return Content(data=data, name=name, content_type=mimetypes.guess_type(name)[0] or "")

    def _read_blob(self, blob: str) -> tuple[int, bytes | None]:
        """A blob's size and bytes (None over the size limit) through one long-lived ``git cat-file --batch``:
        a process per file would cost more than reading it."""
        if self.reader is None or self.reader.poll() is not None:
            self.reader = subprocess.Popen(["git", "-C", str(self.mirror), "cat-file", "--batch"], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.reader.stdin is not None and self.reader.stdout is not None
        try:
            self.reader.stdin.write(f"{blob}\n".encode())
            self.reader.stdin.flush()
            header = self.reader.stdout.readline().decode().split()
        except OSError as exc:
            raise ItemError(f"git cannot read the file: {exc}") from None
        if len(header) != 3 or header[1] != "blob":
            raise ItemError(f"git cannot read the file: {' '.join(header) or 'no answer'}")
        size = int(header[2])
        data = self.reader.stdout.read(size)
        self.reader.stdout.read(1)  # the newline after each object
        return size, (data if size <= self.context.max_item_bytes else None)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.stdin.close()  # type: ignore[union-attr]
            self.reader.wait(timeout=30)
            self.reader.stdout.close()  # type: ignore[union-attr]

    def cursor(self) -> dict[str, Any]:
        return {"commit": self.head} if self.head else {}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        lines = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        return lines[-1][:300] if lines else f"git exited with status {exc.returncode}"
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"no answer within {GIT_TIMEOUT_SECONDS} s"
    return str(exc)[:300]
