from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from accounts.access import CliAccessError, cli_context
from knowledge import rag
from knowledge.rag import limits
from knowledge.extraction import ExtractionError, extract
from knowledge.services.documents import document_id_for_file, document_ingest
from knowledge.services.indexing import backlog_drain


def source_path(path: Path, root: Path) -> str:
    """The path below ``root``: what a re-run of the same folder finds again, and what the id comes from."""
    return (path.relative_to(root) if path.is_relative_to(root) else Path(path.name)).as_posix()


class Command(BaseCommand):
    help = "Index files or folders into a tenant, with progress and a summary naming every file skipped or failed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--actor", default="cli")

    def handle(self, *args: Any, paths: list[Path], tenant: str, actor: str, **options: Any) -> None:
        try:
            found = cli_context(tenant_slug=tenant).tenant
        except CliAccessError as exc:
            raise CommandError(str(exc)) from None
        files: list[tuple[Path, Path]] = []
        skipped: list[str] = []
        for path in paths:
            if path.is_dir():
                for found_file in sorted(p for p in path.rglob("*") if p.is_file()):
                    if any(part.startswith(".") for part in found_file.relative_to(path).parts):
                        skipped.append(f"{found_file}: a hidden file")
                    else:
                        files.append((found_file, path))
            elif path.is_file():
                files.append((path, path.parent))
            else:
                raise CommandError(f"{path}: no such file or folder")
        documents = chunks = 0
        failures: list[str] = []
        limit = settings.QUARRY_UPLOAD_MAX_BYTES
        for path, root in tqdm(files, desc="ingest", unit="file", disable=not files):
            try:
                size = path.stat().st_size
                if size > limit:
                    raise ExtractionError(f"{path.name} is {limits.describe_bytes(size)}, over the limit of {limits.describe_bytes(limit)}")
                extracted = extract(path.read_bytes(), filename=path.name, max_bytes=limit)
                relative, uri = source_path(path, root), path.resolve().as_uri()
                doc = rag.RAGDocument(
                    document_id_for_file(tenant=found, name=relative, folders=True, uri=uri), extracted.text,
                    title=extracted.title or path.stem, uri=uri,
                    # source_path names the file the id belongs to (documents.document_file_name).
                    metadata={"source_name": path.name, "source_path": relative},
                )
                chunks += document_ingest(tenant=found, documents=[doc], actor=actor, passages={doc.id: extracted.passages})
                documents += 1
            except ExtractionError as exc:
                # An unsupported type is skipped; anything else about the file is a failure.
                (skipped if "unsupported file type" in str(exc) else failures).append(f"{path}: {exc}")
            except (rag.RAGError, ValueError, OSError) as exc:
                failures.append(f"{path}: {exc}")
        backlog_drain(namespace=found.slug)  # a very long file leaves postings and HNSW entries to do
        for line in skipped:
            self.stderr.write(f"skipped: {line}")
        for line in failures:
            self.stderr.write(f"failed: {line}")
        self.stdout.write(f"{documents} documents, {chunks} chunks, {len(skipped)} skipped, {len(failures)} failed")
        if (failures or skipped) and not documents:
            raise CommandError("nothing was indexed")
