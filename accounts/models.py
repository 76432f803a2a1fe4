"""Tenants, who belongs to them, and the API tokens that act for them."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

# Tenant slugs appear in URLs, API bodies and chunk namespaces: keep them boring.
TENANT_SLUG_RE = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"


class Role(models.TextChoices):
    """Roles are ordered: each includes the rights of the ones before it."""

    READER = "reader", "Reader"
    EDITOR = "editor", "Editor"
    ADMIN = "admin", "Admin"

    @classmethod
    def rank(cls, role: str) -> int:
        return {cls.READER: 1, cls.EDITOR: 2, cls.ADMIN: 3}[cls(role)]

    @classmethod
    def lowest(cls, *roles: str) -> Role:
        return cls(min(roles, key=cls.rank))

    @classmethod
    def with_article(cls, role: str) -> str:
        """The role as a sentence names it: "a reader", "an editor", "an admin"."""
        name = cls(role).value
        return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


class TenantQuerySet(models.QuerySet["Tenant"]):
    def public(self) -> TenantQuerySet:
        """Tenants people and tokens can work in: every tenant but the private stores."""
        return self.filter(private_to__isnull=True)


class Tenant(models.Model):
    """The namespace every document, chunk, session and token belongs to.

    A *private store* (``private_to`` set) is a namespace of its own for documents that belong
    to one conversation of ``private_to`` (its attached files, ``chat.models.SessionFiles``): its
    chunks, term statistics and graph are apart from the tenant's, so no search of the tenant can
    reach them. Nobody is a member of one and no access path resolves it (``TenantQuerySet.public``):
    only the conversation's owner reaches it, through the chat code that holds the link.
    """

    slug = models.CharField(
        max_length=64,
        unique=True,
        validators=[RegexValidator(TENANT_SLUG_RE, "Letters, digits, '-' and '_' only, at most 64, starting with a letter or digit.")],
    )
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # A private store: the tenant whose conversation it serves (deleted with that tenant).
    private_to = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="private_stores")
    # At most this many chunks in the namespace (None: no bound). The document worker fails a document
    # that would pass it, before embedding; ``chunk_quota_name`` is what its message calls the bound.
    chunk_quota = models.PositiveIntegerField(null=True, blank=True)
    chunk_quota_name = models.CharField(max_length=64, blank=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.READER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # One role per user and tenant; also the index for "is this user in that tenant".
            models.UniqueConstraint(fields=["user", "tenant"], name="membership_user_tenant_unique"),
        ]
        indexes = [models.Index(fields=["tenant", "role"], name="membership_tenant_role")]  # admin: members of a tenant

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant} ({self.role})"


# Group names appear in URLs (``/v1/groups/{name}``) and access lists: the tenant slug's alphabet.
GROUP_NAME_RE = TENANT_SLUG_RE


class Group(models.Model):
    """A named set of a tenant's members, managed by its admins: what a document's access list names
    besides single users (issue 34). Not Django's ``auth.Group``: that one grants model permissions,
    this one grants reading restricted documents of one tenant.

    Documents name a group by its primary key (``g:<id>`` in ``Document.access``): renaming keeps their
    access, and a deleted group's id stays in their lists, naming nobody (so they stay restricted, and
    only admins read them, until an editor changes their access).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="groups")
    name = models.CharField(
        max_length=64,
        validators=[RegexValidator(GROUP_NAME_RE, "Letters, digits, '-' and '_' only, at most 64, starting with a letter or digit.")],
    )
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="quarry_groups", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # One group of a name per tenant; also the lookup by name of the API and of access lists.
            models.UniqueConstraint(fields=["tenant", "name"], name="group_tenant_name_unique"),
        ]
        ordering = ["tenant", "name"]

    def __str__(self) -> str:
        return f"{self.name} @ {self.tenant}"


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """A bearer token acting for ``owner`` in one tenant, with at most ``role``.

    Only a SHA-256 digest of the secret is stored (the secret has 256 bits of
    entropy, so a slow password hash buys nothing); ``prefix`` lets people tell
    their tokens apart without the secret.
    """

    PREFIX = "qry_"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_tokens")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.READER)
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)  # the lookup on every API call
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["tenant", "owner"], name="apitoken_tenant_owner")]  # admin lists
        verbose_name = "API token"  # not Django's "api token" from the class name

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.tenant}, {self.role})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @staticmethod
    def hash_secret(secret: str) -> str:
        return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class ThrottleCount(models.Model):
    """One throttle window's count of requests for one key (``<scope>:<token|user|ip>:<id>``).

    Written only by ``common.throttling.PostgresCounters`` with one atomic upsert per request (the
    ``LOCATION`` of ``QUARRY_THROTTLE_STORE`` names this table), never through the ORM: the ORM
    cannot increment-or-reset-and-return in one statement, and anything less loses updates under
    concurrency. A model still declares it so migrations create it and test flushes empty it.
    The table is UNLOGGED (migration 0004): a count lost in a crash only lets a minute's requests
    through again, and skipping the WAL keeps a write per request cheap.
    """

    key = models.CharField(max_length=200, primary_key=True)
    hits = models.PositiveIntegerField()
    window_ends = models.DateTimeField()

    class Meta:
        db_table = "quarry_throttle"
        # The cull of expired windows (DELETE ... WHERE window_ends < now()).
        indexes = [models.Index(fields=["window_ends"], name="throttle_window_ends")]

    def __str__(self) -> str:
        return f"{self.key}: {self.hits} until {self.window_ends:%H:%M:%S}"
