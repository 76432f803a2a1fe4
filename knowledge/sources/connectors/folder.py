"""Folder sources: a server-side folder (a mounted share), read recursively.

Only folders under a root of ``QUARRY_SOURCE_FOLDER_ROOTS`` can be named (no roots: folder
sources are refused), and nothing outside the root is read: a symlink is followed only when its
target is still under the root. The version token is ``mtime_ns:size``; the sync then compares
content hashes, so a touched but unchanged file is not written again.
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from django.conf import settings

from knowledge.sources.connectors.base import Content, Context, ConfigError, Item, ItemError, Known, ListingError, PathFilter, refuse_unknown, string_list, text


def allowed_roots() -> list[Path]:
    return [Path(r).resolve() for r in settings.QUARRY_SOURCE_FOLDER_ROOTS]


def path_under_roots(raw: str, field: str, *, off: str) -> Path:
    """``raw`` resolved (``..`` and symlinks followed), when it is an absolute path under a root of
    ``QUARRY_SOURCE_FOLDER_ROOTS``; otherwise ``ConfigError`` naming ``field`` (``off``: the message when
    the server sets no roots). Folder sources and git repositories on this server's disk both obey it."""
    roots = allowed_roots()
    if not roots:
        raise ConfigError(field, off)
    if not os.path.isabs(raw):
        raise ConfigError(field, "must be an absolute path")
    resolved = Path(raw).resolve()
    if not any(resolved.is_relative_to(root) for root in roots):
        raise ConfigError(field, f"{raw} is outside the folders sources may read ({', '.join(map(str, roots))})")
    return resolved


class FolderConnector:
    kind: ClassVar[str] = "folder"
    secret_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:
        refuse_unknown(config, ("path", "include", "exclude"))
        raw = text(config, "path", required=True)
        resolved = path_under_roots(raw, "config.path", off="folder sources are turned off: the server sets no QUARRY_SOURCE_FOLDER_ROOTS")
        return {"path": str(resolved), "include": string_list(config, "include"), "exclude": string_list(config, "exclude")}

    def __init__(self, config: Mapping[str, Any], secrets: Mapping[str, str], context: Context) -> None:
        self.root = Path(config["path"])
        self.context = context
        self.filter = PathFilter(tuple(config.get("include") or ()), tuple(config.get("exclude") or ()), context.default_suffixes)

    def _check_root(self, error: Callable[[str], Exception]) -> None:
        # Checked on every sync too: a root the operator removed since the source was added stops it.
        if not any(self.root.is_relative_to(root) for root in allowed_roots()):
            raise error(f"{self.root} is no longer under QUARRY_SOURCE_FOLDER_ROOTS on this server")

    def probe(self) -> None:
        self._check_root(lambda message: ConfigError("config.path", message))
        if not self.root.is_dir():
            raise ConfigError("config.path", f"{self.root} is not a folder this server can read")

    def list_items(self, known: Mapping[str, Known], cursor: Mapping[str, Any]) -> Iterator[Item]:
        self._check_root(ListingError)
        if not self.root.is_dir():
            raise ListingError(f"{self.root} is not a folder (unmounted?)")

        def failed(error: OSError) -> None:
            # A folder that cannot be read midway: the listing is incomplete, so nothing may be deleted.
            raise ListingError(f"cannot read {error.filename}: {error.strerror}")

        for folder, dirs, files in os.walk(self.root, onerror=failed, followlinks=False):
            here = Path(folder)
            # Symlinked folders are walked only when they stay under the root (os.walk does not follow them).
            dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink() or self._inside(here / d))
            for d in [d for d in dirs if (here / d).is_symlink()]:
                yield from self._walk_linked(here / d)
            for name in sorted(files):
                item = self._item(here / name)
                if item is not None:
                    yield item

    def _walk_linked(self, link: Path) -> Iterator[Item]:
        for folder, dirs, files in os.walk(link, followlinks=False):
            here = Path(folder)
            dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink())  # one level of links: no cycles
            for name in sorted(files):
                item = self._item(here / name)
                if item is not None:
                    yield item

    def _inside(self, path: Path) -> bool:
        try:
            return path.resolve().is_relative_to(self.root)
        except OSError:
            return False

    def _item(self, path: Path) -> Item | None:
        relative = path.relative_to(self.root).as_posix()
        if not self.filter.wanted(relative) or (path.is_symlink() and not self._inside(path)):
            return None
        try:
            stat = path.stat()
        except OSError:
            return None  # vanished between the listing and now, or a dangling link
        if not path.is_file():
            return None
        return Item(path=relative, version=f"{stat.st_mtime_ns}:{stat.st_size}", uri=path.as_uri(), title="")

    def fetch(self, item: Item) -> Content:
        path = self.root / item.path
        if not self._inside(path):
            raise ItemError("the file now links outside the source's folder")
        try:
            size = path.stat().st_size
            if size > self.context.max_item_bytes:
                raise ItemError(f"{size:,} bytes, over the limit of {self.context.max_item_bytes:,} bytes per item")
            data = path.read_bytes()
        except OSError as exc:
            raise ItemError(f"cannot read the file: {exc.strerror}") from None
        return Content(data=data, name=path.name, content_type=mimetypes.guess_type(path.name)[0] or "")

    def cursor(self) -> dict[str, Any]:
        return {}
