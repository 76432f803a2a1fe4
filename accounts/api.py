"""REST endpoints for accounts: who am I, token management and groups for tenant admins."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import TenantContext, get_for_tenant, resolve_tenant_context
from accounts.models import GROUP_NAME_RE, ApiToken, Group, Role
from accounts.permissions import IsTenantAdmin, IsTenantEditor, IsTenantReader
from accounts.selectors import group_get, groups_of_tenant
from accounts.services import (
    GroupError,
    api_token_create,
    api_token_revoke,
    group_create,
    group_delete,
    group_member_add,
    group_member_remove,
)
from common.serializers import ClosedSerializer, StrictCharField, TenantField

# Token ids are bigints; a larger number names no token (and PostgreSQL would refuse it).
MAX_TOKEN_ID = 2**63 - 1


class MeOutputSerializer(serializers.Serializer):
    username = serializers.CharField(allow_null=True)
    tenant = serializers.CharField()
    role = serializers.ChoiceField(choices=Role.choices)
    auth = serializers.ChoiceField(choices=["token", "session", "none"])


TENANT_QUERY = OpenApiParameter(
    "tenant", {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"}, OpenApiParameter.QUERY, required=False,
    description="Tenant slug; default: the token's tenant.",
)


class MeApi(APIView):
    permission_classes = [IsTenantReader]

    @extend_schema(operation_id="me", parameters=[TENANT_QUERY], responses={200: MeOutputSerializer},
                   summary="The caller, its tenant and role")
    def get(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        auth = "token" if ctx.token else ("session" if ctx.user.is_authenticated else "none")
        data = {
            "username": ctx.user.get_username() if ctx.user.is_authenticated else None,
            "tenant": ctx.tenant.slug,
            "role": ctx.role,
            "auth": auth,
        }
        return Response(MeOutputSerializer(data).data)


class TokenSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username")
    tenant = serializers.CharField(source="tenant.slug")

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "role", "owner", "tenant", "created_at", "last_used_at", "revoked_at"]


class TokenCreatedSerializer(TokenSerializer):
    token = serializers.CharField(help_text="The secret: shown this once, never stored.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]


class TokenListOutputSerializer(serializers.Serializer):
    tokens = TokenSerializer(many=True, help_text="Newest first, at most 500.")


class TokenCreateInputSerializer(ClosedSerializer):
    """A new token of the caller, in the tenant, at most the caller's role."""

    name = StrictCharField(max_length=100, required=False, default="", allow_blank=True)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.READER, help_text="At most your own role.")
    tenant = TenantField()


class TokenListApi(APIView):
    permission_classes = [IsTenantAdmin]

    @extend_schema(operation_id="tokens_list", parameters=[TENANT_QUERY], responses={200: TokenListOutputSerializer},
                   summary="The tenant's API tokens (admin)")
    def get(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        tokens = ApiToken.objects.filter(tenant=ctx.tenant).select_related("owner", "tenant").order_by("-created_at")[:500]
        return Response({"tokens": TokenSerializer(tokens, many=True).data})

    @extend_schema(operation_id="tokens_create", request=TokenCreateInputSerializer, responses={201: TokenCreatedSerializer},
                   summary="Create a token for yourself (admin); the secret is shown once")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = TokenCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        # An admin cannot mint a token above their own effective role (a reader token stays a reader).
        if Role.rank(data.validated_data["role"]) > Role.rank(ctx.role):
            raise serializers.ValidationError({"role": [f"Cannot exceed your own role ({ctx.role})."]})
        token, secret = api_token_create(
            tenant=ctx.tenant, owner=ctx.user, role=data.validated_data["role"], name=data.validated_data["name"]
        )
        body = dict(TokenSerializer(token).data)
        body["token"] = secret
        return Response(body, status=status.HTTP_201_CREATED)


class TokenDetailApi(APIView):
    permission_classes = [IsTenantAdmin]

    @extend_schema(
        operation_id="tokens_revoke",
        parameters=[OpenApiParameter("token_id", {"type": "integer", "minimum": 0, "maximum": MAX_TOKEN_ID}, OpenApiParameter.PATH),
                    TENANT_QUERY],
        responses={204: None}, summary="Revoke a token of the tenant (admin)",
    )
    def delete(self, request: Request, token_id: int) -> Response:
        ctx = resolve_tenant_context(request)
        if token_id > MAX_TOKEN_ID:
            raise exceptions.NotFound()
        token = get_for_tenant(ApiToken.objects.all(), tenant=ctx.tenant, pk=token_id)
        api_token_revoke(token=token)
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- Groups (issue 34): who may read restricted documents ----------------------------------------------


class GroupOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    members = serializers.ListField(child=serializers.CharField(), required=False,
                                    help_text="Usernames, shown to the tenant's admins.")
    created_at = serializers.DateTimeField()


class GroupListOutputSerializer(serializers.Serializer):
    groups = GroupOutputSerializer(many=True)


class GroupCreateInputSerializer(ClosedSerializer):
    name = StrictCharField(max_length=64, help_text="Letters, digits, '-' and '_', starting with a letter or digit; unique in the tenant.")
    tenant = TenantField()


class GroupMemberInputSerializer(ClosedSerializer):
    username = StrictCharField(max_length=150, help_text="A member of the tenant.")
    tenant = TenantField()


def _group_json(group: Group, *, members: bool) -> dict[str, object]:
    out: dict[str, object] = {"name": group.name, "created_at": group.created_at}
    if members:
        out["members"] = sorted(u.get_username() for u in group.members.all())
    return out


def _group_or_404(ctx: TenantContext, name: str) -> Group:
    if len(name) > 64 or "\x00" in name:
        raise exceptions.NotFound()  # no group could have this name: no query either
    group = group_get(tenant=ctx.tenant, name=name)
    if group is None:
        raise exceptions.NotFound()
    return group


def _group_error(exc: GroupError) -> exceptions.ValidationError:
    return exceptions.ValidationError({exc.field: [exc.message]})


GROUP_NAME_PATH = OpenApiParameter("name", {"type": "string", "pattern": GROUP_NAME_RE}, OpenApiParameter.PATH)


class GroupListApi(APIView):
    """Editors list the group names (to write access lists); admins also see members and manage them."""

    def get_permissions(self) -> list[Any]:
        return [IsTenantEditor()] if self.request.method in ("GET", "HEAD", "OPTIONS") else [IsTenantAdmin()]

    @extend_schema(operation_id="groups_list", parameters=[TENANT_QUERY], responses={200: GroupListOutputSerializer},
                   summary="The tenant's groups (editor; members shown to admins)")
    def get(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        admin = ctx.has_role(Role.ADMIN)
        return Response({"groups": [_group_json(g, members=admin) for g in groups_of_tenant(tenant=ctx.tenant)]})

    @extend_schema(operation_id="groups_create", request=GroupCreateInputSerializer, responses={201: GroupOutputSerializer},
                   summary="Create a group (admin)")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = GroupCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            group = group_create(tenant=ctx.tenant, name=data.validated_data["name"])
        except GroupError as exc:
            raise _group_error(exc) from None
        return Response(_group_json(group, members=True), status=status.HTTP_201_CREATED)


class GroupDetailApi(APIView):
    permission_classes = [IsTenantAdmin]

    @extend_schema(operation_id="groups_destroy", parameters=[GROUP_NAME_PATH, TENANT_QUERY], responses={204: None},
                   summary="Delete a group (admin); documents restricted to it stay restricted, to admins")
    def delete(self, request: Request, name: str) -> Response:
        ctx = resolve_tenant_context(request)
        group_delete(group=_group_or_404(ctx, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class GroupMembersApi(APIView):
    permission_classes = [IsTenantAdmin]

    @extend_schema(operation_id="groups_members_add", parameters=[GROUP_NAME_PATH], request=GroupMemberInputSerializer,
                   responses={200: GroupOutputSerializer}, summary="Add a tenant member to a group (admin); counts from their next request")
    def post(self, request: Request, name: str) -> Response:
        ctx = resolve_tenant_context(request)
        group = _group_or_404(ctx, name)
        data = GroupMemberInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            group_member_add(group=group, username=data.validated_data["username"])
        except GroupError as exc:
            raise _group_error(exc) from None
        return Response(_group_json(group, members=True))


class GroupMemberDetailApi(APIView):
    permission_classes = [IsTenantAdmin]

    @extend_schema(operation_id="groups_members_remove",
                   parameters=[GROUP_NAME_PATH, OpenApiParameter("username", str, OpenApiParameter.PATH), TENANT_QUERY],
                   responses={204: None}, summary="Take a member out of a group (admin); counts from their next request")
    def delete(self, request: Request, name: str, username: str) -> Response:
        ctx = resolve_tenant_context(request)
        group = _group_or_404(ctx, name)
        member = group.members.filter(username=username).first() if "\x00" not in username and len(username) <= 150 else None
        if member is None:
            raise exceptions.NotFound()
        group_member_remove(group=group, user=member)
        return Response(status=status.HTTP_204_NO_CONTENT)
