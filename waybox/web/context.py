"""What every page's template knows: the user's permissions and waybox's version."""

from __future__ import annotations

from django.http import HttpRequest

from waybox import __version__
from waybox.web.access import permissions


def web_context(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    return {"can": permissions(user), "waybox_version": __version__}
