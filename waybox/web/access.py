"""Who may do what, in one place for the pages, the archive files and the API.

Anonymous visitors get only what the PUBLIC_* config keys grant; any logged-in user may
browse, add and re-run; deleting needs Django's `waybox.delete_snapshot` permission (a
superuser has it). Crawls and Processes are never public: they show how the machine runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from waybox.web.conf import flag

INDEX = "index"
SNAPSHOTS = "snapshots"
ADD = "add"
MANAGE = "manage"
DELETE = "delete"
PUBLIC_KEYS = {INDEX: "PUBLIC_INDEX", SNAPSHOTS: "PUBLIC_SNAPSHOTS", ADD: "PUBLIC_ADD"}


def allowed(user, what: str) -> bool:
    """May `user` (possibly anonymous) do `what`?"""
    if user is not None and user.is_authenticated and user.is_active:
        if what == DELETE:
            return user.has_perm("waybox.delete_snapshot")
        return True
    key = PUBLIC_KEYS.get(what)
    return bool(key and flag(key))


def permissions(user) -> dict[str, bool]:
    return {what: allowed(user, what) for what in (INDEX, SNAPSHOTS, ADD, MANAGE, DELETE)}


def require(what: str) -> Callable:
    """View decorator: anonymous visitors go to the login page, logged-in users get 403."""

    def decorate(view: Callable) -> Callable:
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if allowed(request.user, what):
                return view(request, *args, **kwargs)
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            raise PermissionDenied(f"you may not {what} here")

        return wrapper

    return decorate
