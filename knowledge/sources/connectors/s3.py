"""S3 sources: any S3-compatible bucket (AWS, MinIO, Ceph, ...) through boto3.

Configuration: ``bucket``, optional ``prefix``, ``endpoint_url`` (absent: AWS), ``region``,
``access_key_id`` and the secret ``secret_access_key`` (absent both: boto3's own credential
chain). The object's ETag is the version token: only objects whose ETag changed are downloaded.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import boto3
import botocore.config
import botocore.exceptions

from knowledge.sources.connectors.base import (
    Content, Context, ConfigError, Item, ItemError, Known, ListingError, PathFilter, refuse_blocked_url, refuse_unknown, string_list, text,
)

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_CLIENT_ERRORS = (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)


class S3Connector:
    kind: ClassVar[str] = "s3"
    secret_fields: ClassVar[tuple[str, ...]] = ("secret_access_key",)

    @classmethod
    def check_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:
        refuse_unknown(config, ("bucket", "prefix", "endpoint_url", "region", "access_key_id", "secret_access_key", "include", "exclude"))
        bucket = text(config, "bucket", required=True, max_length=63)
        if not _BUCKET.fullmatch(bucket):
            raise ConfigError("config.bucket", "is not a bucket name (3-63 lowercase letters, digits, '.' and '-')")
        endpoint = text(config, "endpoint_url")
        if endpoint and not re.match(r"^https?://[^/\s]+", endpoint):
            raise ConfigError("config.endpoint_url", f"{endpoint[:200]!r} is not an http(s) URL")
        if endpoint:
            refuse_blocked_url(endpoint, "config.endpoint_url")
        key_id = text(config, "access_key_id", max_length=256)
        if bool(key_id) != bool(secrets.get("secret_access_key")):
            field = "config.secret_access_key" if key_id else "config.access_key_id"
            raise ConfigError(field, "give access_key_id and secret_access_key together (or neither, for the server's own credentials)")
        return {"bucket": bucket, "prefix": text(config, "prefix", max_length=1024), "endpoint_url": endpoint,
                "region": text(config, "region", default="us-east-1", max_length=64), "access_key_id": key_id,
                "include": string_list(config, "include"), "exclude": string_list(config, "exclude")}

    def __init__(self, config: Mapping[str, Any], secrets: Mapping[str, str], context: Context) -> None:
        self.bucket = config["bucket"]
        self.prefix = config.get("prefix") or ""
        self.endpoint = config.get("endpoint_url") or None
        self.context = context
        self.filter = PathFilter(tuple(config.get("include") or ()), tuple(config.get("exclude") or ()), context.default_suffixes)
        credentials = {}
        if config.get("access_key_id"):
            credentials = {"aws_access_key_id": config["access_key_id"], "aws_secret_access_key": secrets.get("secret_access_key", "")}
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=config.get("region") or "us-east-1",
            config=botocore.config.Config(user_agent_extra=context.user_agent, retries={"max_attempts": 3, "mode": "standard"},
                                          connect_timeout=10, read_timeout=60),
            **credentials,
        )

    def probe(self) -> None:
        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1)
        except _CLIENT_ERRORS as exc:
            raise ConfigError("config.bucket", f"the bucket {self.bucket!r} cannot be listed: {_reason(exc)}") from None

    def list_items(self, known: Mapping[str, Known], cursor: Mapping[str, Any]) -> Iterator[Item]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix)
        try:
            for page in pages:
                for entry in page.get("Contents", []):
                    key = entry["Key"]
                    relative = key[len(self.prefix):].lstrip("/") if self.prefix else key
                    if key.endswith("/") or not relative or not self.filter.wanted(relative):
                        continue
                    etag = str(entry.get("ETag", "")).strip('"')
                    yield Item(path=key, version=etag or f"{entry.get('LastModified')}:{entry.get('Size')}", uri=self._uri(key),
                               extra={"size": int(entry.get("Size", 0))})
        except _CLIENT_ERRORS as exc:
            raise ListingError(f"listing the bucket {self.bucket!r} failed: {_reason(exc)}") from None

    def _uri(self, key: str) -> str:
        return f"{self.endpoint.rstrip('/')}/{self.bucket}/{key}" if self.endpoint else f"s3://{self.bucket}/{key}"

    def fetch(self, item: Item) -> Content:
        size = int(item.extra.get("size", 0))
        if size > self.context.max_item_bytes:
            raise ItemError(f"{size:,} bytes, over the limit of {self.context.max_item_bytes:,} bytes per item")
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=item.path)
            data = answer["Body"].read(self.context.max_item_bytes + 1)
        except _CLIENT_ERRORS as exc:
            raise ItemError(f"the object could not be read: {_reason(exc)}") from None
        if len(data) > self.context.max_item_bytes:
            raise ItemError(f"over the limit of {self.context.max_item_bytes:,} bytes per item")
        name = item.path.rsplit("/", 1)[-1]
        mime = str(answer.get("ContentType") or "")
        return Content(data=data, name=name, content_type=mimetypes.guess_type(name)[0] or ("" if mime == "binary/octet-stream" else mime))

    def cursor(self) -> dict[str, Any]:
        return {}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".strip(": ")[:300]
    return str(exc)[:300]
