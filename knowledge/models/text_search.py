"""Text search configuration: the languages a tenant may index in, the ``regconfig`` column, and the
expressions the chunk's ``tsvector`` is generated from."""

from __future__ import annotations

from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import F, Func, Value
from django.db.models.functions import Coalesce

# Text search: every tenant indexes and queries with one configuration ``quarry_<language>``
# (migration 0013): PostgreSQL's Snowball stemmer of that language, with ``unaccent`` in front
# where the server has the extension, over text passed through ``quarry_search_text`` (runs of
# Chinese, Japanese and Korean characters become overlapping bigrams, which the default parser
# then splits like words). The chunk stores its configuration (``Chunk.search_config``) and the
# tenant's statistics row the one its chunks and queries use (``CorpusStat.search_config``).
DEFAULT_SEARCH_LANGUAGE = "english"
# The Snowball languages of PostgreSQL 15 and later, and "simple" (no stemming, no stop words).
SEARCH_LANGUAGES = (
    "simple", "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish", "french",
    "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali",
    "norwegian", "portuguese", "romanian", "russian", "serbian", "spanish", "swedish", "tamil", "turkish", "yiddish",
)


def search_config_name(language: str) -> str:
    """The text search configuration of ``language`` (one of ``SEARCH_LANGUAGES``), as SQL knows it."""
    if language not in SEARCH_LANGUAGES:
        raise ValueError(f"unknown text search language {language!r}")
    return f"quarry_{language}"


DEFAULT_SEARCH_CONFIG = search_config_name(DEFAULT_SEARCH_LANGUAGE)


def tenant_config_sql(tenant_param: str = "%(tenant)s") -> str:
    """SQL for the tenant's text search configuration (its statistics row's; the default before it
    has one). Read in the statement that uses it, so it always matches the chunks that statement sees."""
    return (
        f"coalesce((SELECT s.search_config FROM knowledge_corpusstat s WHERE s.tenant_id = {tenant_param}), "
        f"'{DEFAULT_SEARCH_CONFIG}'::regconfig)"
    )


class RegConfigField(models.CharField):
    """A PostgreSQL ``regconfig`` (a text search configuration, stored as its OID, read back as its name).

    What ``to_tsvector`` takes in a generated column: the configuration is part of the row, so a
    tenant's chunks can be re-tokenized by changing it. Values are configuration names."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("max_length", 63)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def db_type(self, connection: object) -> str:
        return "regconfig"

    def cast_db_type(self, connection: object) -> str:
        return "regconfig"

    def deconstruct(self) -> tuple[str, str, list[object], dict[str, object]]:
        # Migrations name the field where it is imported from (migration 0013 does), not this
        # module: otherwise the package split would read as a change of every such column.
        name, _path, args, kwargs = super().deconstruct()
        return name, "knowledge.models.RegConfigField", args, kwargs


def indexed_text(*fields: str) -> Func:
    """The text of ``fields`` as the index tokenizes it: joined by spaces, CJK runs as bigrams.
    Queries pass their text through the same SQL function, so both sides split alike."""
    parts: list[object] = []
    for name in fields:
        if parts:
            parts.append(Value(" "))
        parts.append(Coalesce(F(name), Value("")))
    joined = Func(*parts, template="(%(expressions)s)", arg_joiner=" || ", output_field=models.TextField())
    return Func(joined, function="quarry_search_text", output_field=models.TextField())


def title_vector() -> Func:
    """A chunk's title as its text search configuration tokenizes it (unweighted)."""
    return Func(F("search_config"), indexed_text("title"), function="to_tsvector", output_field=SearchVectorField())
