"""Token auth, revocation, roles and tenant isolation over the real API."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import override_settings
from rest_framework.test import APIClient

from accounts.models import ApiToken, Membership, Role
from accounts.services import api_token_create, api_token_revoke
from tests.conftest import World
from tests.factories import make_tenant, make_token


def test_token_identifies_user_tenant_and_role(world: World) -> None:
    response = world.client(world.teammate).get("/v1/me")
    assert response.status_code == 200
    assert response.json() == {"username": "teammate", "tenant": "acme", "role": "reader", "auth": "token"}


def test_token_use_is_recorded(world: World) -> None:
    secret = make_token(world.acme, world.teammate)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/v1/me").status_code == 200
    token = ApiToken.objects.get(digest=ApiToken.hash_secret(secret))
    assert token.last_used_at is not None


def test_only_a_hash_of_the_secret_is_stored(world: World) -> None:
    secret = make_token(world.acme, world.owner)
    token = ApiToken.objects.get(digest=ApiToken.hash_secret(secret))
    assert secret not in (token.digest, token.prefix) and secret.startswith(token.prefix)


def test_missing_credentials_is_401_with_json(world: World) -> None:
    response = APIClient().get("/v1/me")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["error"] == "not_authenticated"


def test_unknown_token_is_401(world: World) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer qry_not-a-real-token")
    response = client.get("/v1/me")
    assert response.status_code == 401
    assert response.json() == {"error": "authentication_failed", "detail": "Invalid or revoked API token."}


def test_malformed_authorization_header_is_401(world: World) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer two words")
    response = client.get("/v1/me")
    assert response.status_code == 401
    assert "Malformed Authorization header" in response.json()["detail"]


def test_revoked_token_is_401(world: World) -> None:
    secret = make_token(world.acme, world.owner)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/v1/me").status_code == 200
    api_token_revoke(token=ApiToken.objects.get(digest=ApiToken.hash_secret(secret)))
    response = client.get("/v1/me")
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid or revoked API token."


def test_token_stops_working_when_owner_leaves_the_tenant(world: World) -> None:
    client = world.client(world.teammate)
    Membership.objects.filter(user=world.teammate, tenant=world.acme).delete()
    response = client.get("/v1/me")
    assert response.status_code == 401
    assert "no longer a member" in response.json()["detail"]


def test_token_role_is_capped_by_the_owners_current_role(world: World) -> None:
    client = world.client(world.owner, role=Role.ADMIN)
    Membership.objects.filter(user=world.owner, tenant=world.acme).update(role=Role.READER)
    assert client.get("/v1/me").json()["role"] == "reader"
    assert client.get("/v1/tokens").status_code == 403


def test_omitted_tenant_is_the_tokens_own(world: World) -> None:
    assert world.client(world.outsider).get("/v1/me").json()["tenant"] == "globex"


def test_naming_another_tenant_with_a_token_is_404(world: World) -> None:
    response = world.client(world.outsider).get("/v1/me", {"tenant": "acme"})
    assert response.status_code == 404
    assert response.json()["error"] == "tenant_not_found"


def test_naming_an_unknown_tenant_is_404_like_a_foreign_one(world: World) -> None:
    client = world.client(world.owner)
    assert client.get("/v1/me", {"tenant": "nope"}).status_code == 404


def test_tenant_named_in_json_body_is_checked(world: World) -> None:
    response = world.client(world.outsider).post("/v1/tokens", {"tenant": "acme", "role": "reader"}, format="json")
    assert response.status_code == 404
    assert ApiToken.objects.filter(tenant=world.acme, owner=world.outsider).count() == 0


def test_invalid_tenant_value_is_400_naming_the_field(world: World) -> None:
    response = world.client(world.owner).post("/v1/tokens", {"tenant": ["acme"]}, format="json")
    assert response.status_code == 400
    assert "tenant" in response.json()["fields"]


def test_reader_cannot_manage_tokens(world: World) -> None:
    response = world.client(world.teammate).get("/v1/tokens")
    assert response.status_code == 403
    assert "admin role" in response.json()["detail"]


def test_editor_cannot_manage_tokens(world: World) -> None:
    response = world.client(world.editor).post("/v1/tokens", {"role": "reader"}, format="json")
    assert response.status_code == 403
    assert response.json()["detail"] == "This needs the admin role in tenant acme; you are an editor."


def test_a_token_above_its_owners_role_is_refused_naming_the_role_with_its_article(world: World) -> None:
    with pytest.raises(ValidationError, match="is not an admin of tenant acme; a token cannot carry"):
        api_token_create(tenant=world.acme, owner=world.editor, role="admin")


def test_admin_creates_token_shown_once_and_usable(world: World) -> None:
    response = world.client(world.owner).post("/v1/tokens", {"name": "ci", "role": "editor"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["role"] == "editor" and body["name"] == "ci" and body["token"].startswith(body["prefix"])
    listed = world.client(world.owner).get("/v1/tokens").json()["tokens"]
    assert all("token" not in t for t in listed) and body["id"] in [t["id"] for t in listed]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {body['token']}")
    assert client.get("/v1/me").json()["role"] == "editor"


def test_token_cannot_mint_a_stronger_token(world: World) -> None:
    # An admin user holding an editor token is an editor for this request.
    client = world.client(world.owner, role=Role.EDITOR)
    assert client.post("/v1/tokens", {"role": "admin"}, format="json").status_code == 403


def test_outsider_revoking_our_token_gets_404(world: World) -> None:
    secret = make_token(world.acme, world.teammate)
    token = ApiToken.objects.get(digest=ApiToken.hash_secret(secret))
    response = world.client(world.outsider).delete(f"/v1/tokens/{token.pk}")
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_admin_revokes_token(world: World) -> None:
    secret = make_token(world.acme, world.teammate)
    token = ApiToken.objects.get(digest=ApiToken.hash_secret(secret))
    assert world.client(world.owner).delete(f"/v1/tokens/{token.pk}").status_code == 204
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_malformed_json_is_400_naming_the_problem(world: World) -> None:
    client = world.client(world.owner)
    response = client.generic("POST", "/v1/tokens", '{"role": "reader",', content_type="application/json")
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "parse_error" and "JSON parse error" in body["detail"]


def test_session_user_defaults_to_tenant_DEFAULT(world: World) -> None:
    default = make_tenant("DEFAULT")
    Membership.objects.create(user=world.teammate, tenant=default, role=Role.EDITOR)
    client = APIClient()
    client.force_login(world.teammate)
    assert client.get("/v1/me").json() == {"username": "teammate", "tenant": "DEFAULT", "role": "editor", "auth": "session"}
    assert client.get("/v1/me", {"tenant": "acme"}).json()["role"] == "reader"
    assert client.get("/v1/me", {"tenant": "globex"}).status_code == 404


def test_session_post_requires_csrf(world: World) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world.owner)
    response = client.post("/v1/tokens", {"tenant": "acme"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


@override_settings(QUARRY_AUTH_MODE="none")
def test_auth_mode_none_makes_anonymous_a_reader_of_DEFAULT(world: World) -> None:
    make_tenant("DEFAULT")
    response = APIClient().get("/v1/me")
    assert response.json() == {"username": None, "tenant": "DEFAULT", "role": "reader", "auth": "none"}
    assert APIClient().get("/v1/me", {"tenant": "acme"}).status_code == 404
    assert APIClient().get("/v1/tokens").status_code == 403


def test_create_api_token_command_prints_only_the_token(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("create_api_token", "--tenant", "acme", "--user", "newbie", "--role", "editor")
    out = capsys.readouterr().out
    secret = out.strip()
    assert out.count("\n") == 1 and secret.startswith("qry_")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/v1/me").json() == {"username": "newbie", "tenant": "acme", "role": "editor", "auth": "token"}


def test_create_api_token_never_lowers_an_existing_role(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("create_api_token", "--tenant", "acme", "--user", "owner", "--role", "reader")
    assert Membership.objects.get(user=world.owner, tenant=world.acme).role == "admin"


def test_create_api_token_for_unknown_tenant_fails_clearly(db: None) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="tenant 'ghost' does not exist"):
        call_command("create_api_token", "--tenant", "ghost", "--user", "x")


def test_create_tenant_command_is_idempotent_and_validates(db: None, capsys: pytest.CaptureFixture[str]) -> None:
    from django.core.management.base import CommandError

    call_command("create_tenant", "research")
    call_command("create_tenant", "research")
    assert capsys.readouterr().out.splitlines() == ["created: tenant research", "exists: tenant research"]
    with pytest.raises(CommandError, match="invalid tenant slug"):
        call_command("create_tenant", "bad slug!")


def test_schema_and_docs_are_public(db: None) -> None:
    schema = APIClient().get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/v1/me" in schema.json()["paths"]
    assert APIClient().get("/v1/docs").status_code == 200
