"""`waybox token create | list | revoke`: API tokens for scripts (`Authorization: Bearer ...`)."""

from __future__ import annotations

import json
from datetime import timedelta

import click
from rich.markup import escape

from waybox.cli import App, err_console, pass_app
from waybox.cli.output import emit, format_options

TOKEN_COLUMNS = ["id", "prefix", "name", "user", "state", "created_at", "expires_at", "last_used_at"]


def token_row(t) -> dict:
    return {
        "id": str(t.id), "prefix": t.prefix, "name": t.name, "user": t.user.get_username(), "state": t.state,
        "created_at": t.created_at, "expires_at": t.expires_at, "revoked_at": t.revoked_at,
        "last_used_at": t.last_used_at,
    }


def find_user(username: str | None):
    from django.contrib.auth import get_user_model

    User = get_user_model()
    if username:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise click.BadParameter(f"no user named {username!r} (create one with `waybox manage createsuperuser`)",
                                     param_hint="--user")
        return user
    supers = list(User.objects.filter(is_superuser=True, is_active=True)[:2])
    if len(supers) == 1:
        return supers[0]
    if not supers:
        raise click.UsageError("there is no user yet: run `waybox manage createsuperuser` first")
    raise click.UsageError("there are several superusers: say which with --user NAME")


@click.group(name="token")
def token_group() -> None:
    """API tokens: create, list, revoke."""


@token_group.command(name="create")
@click.option("--user", "username", help="The account the token acts as (default: the only superuser).")
@click.option("--name", default="", help="What the token is for.")
@click.option("--expires-days", type=click.IntRange(min=1), default=None, help="Expire after this many days.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (id and token) instead of the bare token.")
@pass_app
def create(app: App, username: str | None, name: str, expires_days: int | None, as_json: bool) -> None:
    """Create a token and print it (it is shown only this once)."""
    app.boot()
    from waybox.models import APIToken

    user = find_user(username)
    row, secret = APIToken.issue(user, name=name, expires_in=timedelta(days=expires_days) if expires_days else None)
    if as_json:
        click.echo(json.dumps({**token_row(row), "token": secret}, default=str, indent=2))
    else:
        click.echo(secret)
    err_console.print(f"created token {row.prefix}… for {escape(user.get_username())}; it is not shown again. "
                      "Use it as `Authorization: Bearer <token>`.")


@token_group.command(name="list")
@click.option("--all", "show_all", is_flag=True, help="Also revoked and expired tokens.")
@format_options()
@pass_app
def list_(app: App, show_all: bool, fmt: str | None) -> None:
    """Tokens (never the secrets): who, what for, state, last use."""
    app.boot()
    from waybox.models import APIToken

    rows = [token_row(t) for t in APIToken.objects.select_related("user")]
    if not show_all:
        rows = [r for r in rows if r["state"] == "active"]
    if not rows and fmt is None:
        err_console.print("no tokens" + ("" if show_all else " (--all shows revoked and expired ones)"))
        return
    emit(rows, fmt, TOKEN_COLUMNS)


@token_group.command(name="revoke")
@click.argument("token_ids", nargs=-1, required=True, metavar="ID_OR_PREFIX...")
@pass_app
def revoke(app: App, token_ids: tuple[str, ...]) -> None:
    """Revoke tokens by id or by the prefix `token list` shows."""
    app.boot()
    import uuid

    from django.db.models import Q
    from django.utils import timezone

    from waybox.models import APIToken

    for given in token_ids:
        text = given.strip().rstrip("…")
        try:
            match = Q(pk=uuid.UUID(text))
        except ValueError:
            match = Q(prefix=text[:16]) if len(text) >= 8 else None
        rows = list(APIToken.objects.filter(match)) if match is not None else []
        if len(rows) != 1:
            what = "matches no token" if not rows else "matches several tokens: give the id"
            raise click.ClickException(f"{given!r} {what}")
        APIToken.objects.filter(pk=rows[0].pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        err_console.print(f"revoked {rows[0].prefix}… ({escape(rows[0].name or 'unnamed')})")


COMMANDS = [token_group]
