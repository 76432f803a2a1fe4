from __future__ import annotations

import json as jsonlib
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from accounts.access import CliAccessError, cli_context
from accounts.services import tenant_create
from knowledge import rag
from knowledge.evaluation import GRAPH_MODE, RERANK_MODE, SCORE_RERANK_MODE, evaluate_modes, ingest_beir_corpus, read_jsonl
from knowledge.models import Document


class Command(BaseCommand):
    help = (
        "Measure retrieval quality on a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv): nDCG@10, recall@5, "
        "recall@10, the share of queries with every judged document in the top 10 (all@10), Recall@100 and p50/p95 "
        "latency per mode (and hybrid with the knowledge graph, --graph). Ingests the corpus into the tenant first when needed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path)
        parser.add_argument("--tenant", required=True, help="Tenant to evaluate in (created when missing).")
        parser.add_argument("--modes", default="keyword,semantic,hybrid")
        parser.add_argument("--qrels", default="qrels.tsv", help="Judgements file in the folder (e.g. qrels_train.tsv).")
        parser.add_argument("--queries", default="queries.jsonl", help="Queries file in the folder (e.g. queries_all.jsonl).")
        parser.add_argument("--rerank", nargs="?", const="cosine", default=None, choices=("cosine", "colbert"),
                            help="cosine (also --rerank alone, as before): hybrid search re-orders its fused candidates by "
                                 f"cosine similarity. colbert: also evaluate hybrid search followed by the ColBERT stage "
                                 f"({SCORE_RERANK_MODE}, and {RERANK_MODE} with rrf among --fusions), beside the other modes.")
        parser.add_argument("--graph", action="store_true", help=f"Also evaluate hybrid search with the graph leg ({GRAPH_MODE}).")
        parser.add_argument("--fusions", default="rrf,score",
                            help="Hybrid mode's fusions to evaluate: rrf (reported as hybrid), score (as hybrid+score).")
        parser.add_argument("--fusion-weight", type=float, default=None,
                            help="The semantic leg's weight in score fusion (default: QUARRY_HYBRID_FUSION_WEIGHT).")
        parser.add_argument("--json", action="store_true", help="Print one JSON object and nothing else.")
        parser.add_argument("--as", dest="as_user", default=None, metavar="USERNAME",
                            help="Search as this member of the tenant reads (restricted documents they may not read are "
                                 "left out); default: everything, as the shell reads.")

    def handle(self, *args: Any, folder: Path, tenant: str, modes: str, qrels: str, queries: str, rerank: str | None, graph: bool,
               fusions: str, fusion_weight: float | None, json: bool, as_user: str | None = None, **options: Any) -> None:
        for name in ("corpus.jsonl", queries, qrels):
            if not (folder / name).is_file():
                raise CommandError(f"{folder / name} not found: a BEIR folder holds corpus.jsonl, queries.jsonl and {qrels}")
        try:
            wanted = [rag.SearchMode.parse(m.strip()) for m in modes.split(",") if m.strip() and m.strip() not in (GRAPH_MODE, RERANK_MODE, SCORE_RERANK_MODE)]
        except rag.RAGValidationError as exc:
            raise CommandError(f"--modes: {exc.message}") from None
        try:
            chosen = tuple(rag.Fusion.parse(f.strip()) for f in fusions.split(",") if f.strip())
            weight = None if fusion_weight is None else rag.types.check_fusion_weight(fusion_weight)
        except rag.RAGValidationError as exc:
            raise CommandError(f"{'--fusions' if exc.field == 'fusion' else '--fusion-weight'}: {exc.message}") from None
        if not chosen:
            raise CommandError("--fusions: name at least one of rrf, score")
        found, _ = tenant_create(slug=tenant)
        try:
            reader = rag.reader_of(cli_context(tenant_slug=found.slug, username=as_user))
        except CliAccessError as exc:
            raise CommandError(f"--as: {exc}") from None
        quiet = json
        corpus = folder / "corpus.jsonl"
        expected = sum(1 for r in read_jsonl(corpus) if str(r.get("text") or r.get("title") or "").strip())
        if Document.objects.filter(tenant=found).count() < expected:
            with tqdm(total=expected, desc="ingest", unit="doc", disable=quiet) as bar:
                ingest_beir_corpus(tenant=found, corpus=corpus, progress=bar.update)
        with tqdm(desc="queries", unit="query", disable=quiet) as bar:
            results = evaluate_modes(tenant=found, folder=folder, modes=wanted, qrels_file=qrels, queries_file=queries,
                                     progress=bar.update, rerank=rerank == "cosine", graph=graph,
                                     fusions=chosen, fusion_weight=weight, colbert=rerank == "colbert", reader=reader)
        service = rag.tenant_service(found.slug)
        tenant_embedder = rag.tenant_embedder(found.slug)  # the tenant's model, which its queries were embedded with
        report = {"dataset": folder.resolve().name, "tenant": found.slug, "qrels": qrels,
                  "embedding_model": rag.types.declared_model_id(tenant_embedder) if tenant_embedder else None,
                  "fusion_weight": service.fusion_weight if weight is None else weight,
                  **({"reranker": repr(rag.reranker())} if rerank == "colbert" else {}),
                  "modes": {mode: r.as_json() for mode, r in results.items()}}
        if json:
            self.stdout.write(_json_dumps(report))
            return
        self.stdout.write(f"{report['dataset']} ({qrels}), tenant {found.slug}")
        for mode, r in results.items():
            self.stdout.write(f"  {mode:<12} nDCG@10 {r.ndcg_at_10:.4f}  recall@5 {r.recall_at_5:.4f}  recall@10 {r.recall_at_10:.4f}  "
                              f"all@10 {r.all_at_10:.4f}  Recall@100 {r.recall_at_100:.4f}  "
                              f"p50 {r.p50_ms:.1f} ms  p95 {r.p95_ms:.1f} ms  ({r.queries} queries)")


def _json_dumps(value: object) -> str:
    return jsonlib.dumps(value)
