"""First run: while the collection has no user, `waybox server` prints a one-time link that
lets whoever can read the terminal (or the data directory) create the first superuser.

The token lives in `logs/run/setup-token` (mode 0600); it is deleted once a user exists.
"""

from __future__ import annotations

import hmac
import os
import secrets

from waybox.datadir import DataDir

TOKEN_FILE = "setup-token"


def token_path(datadir: DataDir):
    return datadir.run / TOKEN_FILE


def needs_setup() -> bool:
    from django.contrib.auth import get_user_model

    return not get_user_model().objects.exists()


def ensure_token(datadir: DataDir) -> str:
    """The setup token, created if missing."""
    path = token_path(datadir)
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return token


def check_token(datadir: DataDir, given: str) -> bool:
    try:
        expected = token_path(datadir).read_text().strip()
    except OSError:
        return False
    return bool(given) and bool(expected) and hmac.compare_digest(expected, given)


def discard_token(datadir: DataDir) -> None:
    token_path(datadir).unlink(missing_ok=True)
