"""REST endpoints for sources: readers list and read; editors create, change, sync and remove.

Bodies are closed (``common.serializers``); every refusal of the configuration is a 400 naming the
field (``kind``, ``config.url``, ``config.bucket``...) before anything is stored. Another tenant's
source is 404. Secrets sent in ``config`` are stored encrypted and never returned: ``secrets``
lists the names of those set.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import TenantContext, get_for_tenant, resolve_tenant_context
from accounts.models import Role
from accounts.permissions import IsTenantEditor, IsTenantReader
from common.serializers import ClosedSerializer, StrictBooleanField, StrictCharField, StrictIntegerField, TenantField
from knowledge.sources.connectors.base import ConfigError
from knowledge.sources.models import Source, SyncStatus
from knowledge.sources.selectors import latest_syncs, source_list, source_status, sync_json
from knowledge.sources.services.editing import (
    MAX_SCHEDULE_MINUTES, UNSET, source_access_names, source_create, source_delete, source_secret_names, source_update,
)
from knowledge.sources.services.syncing import SourceGone, source_sync_request


@extend_schema_field({"type": "object", "additionalProperties": True, "description": (
    "The kind's settings. web: url, sitemaps, prefixes, include, exclude (regular expressions), max_pages, max_bytes, "
    "delay_seconds, authorization (secret). git: url, branch, include, exclude (globs), uri_template ({commit}, {path}). "
    "folder: path (under QUARRY_SOURCE_FOLDER_ROOTS), include, exclude. s3: bucket, prefix, endpoint_url, region, "
    "access_key_id, secret_access_key (secret), include, exclude.")})
class ConfigField(serializers.DictField):
    pass


class SyncSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=SyncStatus.choices)
    trigger = serializers.CharField(help_text="manual, schedule or created.")
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    listed = serializers.IntegerField(help_text="Items seen so far (grows while the sync runs).")
    added = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    deleted = serializers.IntegerField()
    failed = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.DictField(child=serializers.CharField()), help_text=(
        '[{"item", "reason"}]: those the caller may see (an item is the path of a document; tenant admins see all).'))
    errors_withheld = serializers.IntegerField(help_text="Errors not shown: they name items of documents the caller may not read.")


class SourceAccessSerializer(serializers.Serializer):
    groups = serializers.ListField(child=serializers.CharField())
    users = serializers.ListField(child=serializers.CharField())


ACCESS_HELP = ('{"groups": [...], "users": [...]}: who may read the documents it writes (default: the whole tenant); '
               "a change applies at once to the documents it wrote. Unknown groups or users: a 400 naming them.")


class SourceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    key = serializers.CharField(help_text="The first part of its documents' ids (<key>/<path or URL>) and their metadata.source.")
    kind = serializers.CharField()
    config = ConfigField(help_text="Without secrets.")
    secrets = serializers.ListField(child=serializers.CharField(), help_text="Names of the secrets stored (never their values).")
    schedule_minutes = serializers.IntegerField(allow_null=True, help_text="Sync every N minutes; null: manual only.")
    enabled = serializers.BooleanField(help_text="False: paused (the schedule skips it).")
    status = serializers.CharField(help_text="running, queued, paused, idle (never synced), or the last sync's status.")
    last_sync = SyncSerializer(allow_null=True)
    access = SourceAccessSerializer(help_text="Who may read the documents it writes (both empty: the whole tenant).")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


def source_json(source: Source, last: Any, ctx: TenantContext) -> dict[str, Any]:
    return {
        "id": source.pk, "name": source.name, "key": source.key, "kind": source.kind, "config": source.config,
        "secrets": source_secret_names(source), "schedule_minutes": source.schedule_minutes, "enabled": source.enabled,
        "status": source_status(source, last), "last_sync": sync_json(last, source=source, context=ctx), "access": source_access_names(source),
        "created_at": source.created_at, "updated_at": source.updated_at,
    }


class KindField(StrictCharField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(help_text="web, git, folder or s3 (QUARRY_SOURCE_CONNECTORS).", **kwargs)


class ScheduleField(StrictIntegerField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, min_value=1, max_value=MAX_SCHEDULE_MINUTES,
                         help_text="Sync every N minutes; null or absent: manual syncs only.", **kwargs)


class SourceCreateSerializer(ClosedSerializer):
    name = StrictCharField(max_length=200)
    kind = KindField()
    config = ConfigField()
    schedule_minutes = ScheduleField(required=False, default=None)
    enabled = StrictBooleanField(required=False, default=True)
    access = serializers.JSONField(required=False, default=None, help_text=ACCESS_HELP)
    tenant = TenantField()


class SourceUpdateSerializer(ClosedSerializer):
    name = StrictCharField(max_length=200, required=False)
    config = ConfigField(required=False, help_text="Replaces the configuration; secrets left out are kept, null or \"\" removes one.")
    schedule_minutes = ScheduleField(required=False)
    enabled = StrictBooleanField(required=False)
    access = serializers.JSONField(required=False, help_text=ACCESS_HELP)
    tenant = TenantField()


class SourceListOutputSerializer(serializers.Serializer):
    sources = SourceSerializer(many=True)


class SyncRequestOutputSerializer(serializers.Serializer):
    queued = serializers.BooleanField(help_text="False: merged into the sync already queued or running.")
    source = SourceSerializer()


SOURCE_ID = OpenApiParameter("source_id", OpenApiTypes.INT, OpenApiParameter.PATH)
TENANT = OpenApiParameter("tenant", {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"}, OpenApiParameter.QUERY,
                          required=False, description="Tenant slug; default: the token's tenant.")


def _refused(exc: ConfigError) -> exceptions.ValidationError:
    return exceptions.ValidationError({exc.field: [exc.message]})



def _one(source: Source, ctx: TenantContext) -> dict[str, Any]:
    return source_json(source, latest_syncs([source]).get(source.pk), ctx)


class _ReadOrEdit(APIView):
    """Readers may read; writing needs the editor role."""

    def get_permissions(self) -> list[Any]:
        return [IsTenantReader()] if self.request.method in ("GET", "HEAD", "OPTIONS") else [IsTenantEditor()]


class SourceListApi(_ReadOrEdit):
    throttle_scope = {"POST": "ingest"}

    @extend_schema(operation_id="sources_list", parameters=[TENANT], responses={200: SourceListOutputSerializer},
                   summary="The tenant's sources, with each one's status and last sync")
    def get(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        sources = list(source_list(tenant=ctx.tenant))
        latest = latest_syncs(sources)
        return Response({"sources": [source_json(s, latest.get(s.pk), ctx) for s in sources]})

    @extend_schema(operation_id="sources_create", request=SourceCreateSerializer, responses={201: SourceSerializer},
                   summary="Add a source (editor): checked and reached once, then its first sync is queued",
                   description="A bad configuration (unknown kind, a URL that is not http(s), a folder outside "
                               "QUARRY_SOURCE_FOLDER_ROOTS, a bucket that cannot be listed, a repository git cannot read) is a 400 "
                               "naming the field, and nothing is stored.")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = SourceCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        try:
            source = source_create(tenant=ctx.tenant, name=v["name"], kind=v["kind"], config=v["config"],
                                   schedule_minutes=v["schedule_minutes"], enabled=v["enabled"], actor=ctx.actor,
                                   access=v.get("access"))
        except ConfigError as exc:
            raise _refused(exc) from None
        return Response(_one(source, ctx), status=status.HTTP_201_CREATED)


class SourceDetailApi(_ReadOrEdit):
    @extend_schema(operation_id="sources_retrieve", parameters=[SOURCE_ID, TENANT], responses={200: SourceSerializer},
                   summary="One source, its status and last sync (live counts while it runs)")
    def get(self, request: Request, source_id: int) -> Response:
        ctx = resolve_tenant_context(request)
        return Response(_one(get_for_tenant(Source.objects.live(), tenant=ctx.tenant, pk=source_id), ctx))

    @extend_schema(operation_id="sources_partial_update", parameters=[SOURCE_ID], request=SourceUpdateSerializer,
                   responses={200: SourceSerializer}, summary="Change a source (editor): name, config, schedule, enabled (pause)")
    def patch(self, request: Request, source_id: int) -> Response:
        ctx = resolve_tenant_context(request)
        source = get_for_tenant(Source.objects.live(), tenant=ctx.tenant, pk=source_id)
        data = SourceUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if "access" in v and not ctx.has_role(Role.ADMIN):
            # A change reaches every document the source wrote, restricted ones included (issue 34).
            raise exceptions.PermissionDenied(f"Changing a source's access list needs the admin role in tenant {ctx.tenant.slug}.")
        try:
            source = source_update(source=source, name=v.get("name", UNSET), config=v.get("config", UNSET),
                                   schedule_minutes=v.get("schedule_minutes", UNSET), enabled=v.get("enabled", UNSET), actor=ctx.actor,
                                   access=v.get("access", UNSET))
        except ConfigError as exc:
            raise _refused(exc) from None
        return Response(_one(source, ctx))

    @extend_schema(operation_id="sources_destroy", parameters=[SOURCE_ID, TENANT], responses={202: None},
                   summary="Remove a source (editor): it disappears now, its documents are deleted in the background")
    def delete(self, request: Request, source_id: int) -> Response:
        ctx = resolve_tenant_context(request)
        source = get_for_tenant(Source.objects.live(), tenant=ctx.tenant, pk=source_id)
        source_delete(source=source, actor=ctx.actor)
        return Response(status=status.HTTP_202_ACCEPTED)


class SourceSyncApi(APIView):
    permission_classes = [IsTenantEditor]
    throttle_scope = "ingest"

    @extend_schema(operation_id="sources_sync", parameters=[SOURCE_ID, TENANT], request=None, responses={202: SyncRequestOutputSerializer},
                   summary="Sync now (editor): queued, or merged into the sync already queued or running")
    def post(self, request: Request, source_id: int) -> Response:
        ctx = resolve_tenant_context(request)
        source = get_for_tenant(Source.objects.live(), tenant=ctx.tenant, pk=source_id)
        try:
            queued = source_sync_request(source=source, trigger="manual")
        except SourceGone:
            raise exceptions.NotFound() from None
        source.refresh_from_db()
        return Response({"queued": queued, "source": _one(source, ctx)}, status=status.HTTP_202_ACCEPTED)

