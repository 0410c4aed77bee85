"""API tokens: how scripts authenticate to the REST API.

Only a SHA-256 hash of each token is stored; the token itself is shown once, when it is
created (by `waybox token create` or in the admin). A token acts as its user, so it can do
what that user may do, until it expires or is revoked.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from waybox.models.base import Row

TOKEN_PREFIX = "wbx_"
LAST_USED_EVERY = timedelta(minutes=1)  # last_used_at is a hint, not an audit log: few writes


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class APIToken(Row):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, help_text="What the token is for.")
    prefix = models.CharField(max_length=16, editable=False, help_text="The first characters, to recognise it.")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never expires.")
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'}, {self.user})"

    @classmethod
    def issue(cls, user, name: str = "", expires_in: timedelta | None = None) -> tuple[APIToken, str]:
        """A new token row and the secret token (which is not stored anywhere)."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = cls.objects.create(
            user=user,
            name=name,
            prefix=secret[: len(TOKEN_PREFIX) + 6],
            token_hash=hash_token(secret),
            expires_at=timezone.now() + expires_in if expires_in else None,
        )
        return row, secret

    @classmethod
    def authenticate(cls, secret: str) -> APIToken | None:
        """The valid token row for this secret (its user active), or None."""
        if not secret or not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
            return None
        row = cls.objects.select_related("user").filter(token_hash=hash_token(secret)).first()
        if row is None or not row.is_valid or not row.user.is_active:
            return None
        now = timezone.now()
        if row.last_used_at is None or now - row.last_used_at > LAST_USED_EVERY:
            cls.objects.filter(pk=row.pk).update(last_used_at=now)
        return row

    @property
    def is_valid(self) -> bool:
        now = timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"
