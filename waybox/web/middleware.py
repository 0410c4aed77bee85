"""Security headers for the UI, and keeping archived content on its own origin when set.

* With ARCHIVE_ORIGIN set, that host serves `/archive/...` and nothing else (no UI, no API,
  no admin), and the UI's host redirects `/archive/...` there.
* UI pages get a strict Content-Security-Policy (no inline or foreign scripts), so even a
  stored string that escaped escaping could not run; the admin and the API docs, which
  Django and django-ninja render with inline scripts, get `frame-ancestors`/`object-src` only.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotFound, HttpResponseRedirect
from whitenoise.middleware import WhiteNoiseMiddleware

from waybox.web.conf import archive_origin
from waybox.web.files import GRANT_PARAM, is_archive_host, make_grant

ARCHIVE_PREFIX = "/archive/"
LOOSE_PREFIXES = ("/admin/", "/api/")


def ui_csp(archive: str) -> str:
    extra = f" {archive}" if archive else ""
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; "
        f"img-src 'self' data:{extra}; media-src 'self'{extra}; frame-src 'self'{extra}; "
        "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
    )


class WebSecurityMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        origin = archive_origin()
        is_archive_path = request.path.startswith(ARCHIVE_PREFIX)
        if origin:
            if is_archive_host(request):
                if not is_archive_path:
                    return HttpResponseNotFound("This origin serves archived files only.",
                                                content_type="text/plain; charset=utf-8")
            elif is_archive_path:
                return self.to_archive_origin(request, origin)
        response = self.get_response(request)
        if not is_archive_path and "Content-Security-Policy" not in response:
            if request.path.startswith(LOOSE_PREFIXES):
                response["Content-Security-Policy"] = "object-src 'none'; base-uri 'self'; frame-ancestors 'none'"
            else:
                host = urlsplit(origin)
                response["Content-Security-Policy"] = ui_csp(f"{host.scheme}://{host.netloc}" if origin else "")
        return response

    @staticmethod
    def to_archive_origin(request: HttpRequest, origin: str) -> HttpResponse:
        query = request.GET.copy()
        if request.user.is_authenticated:
            query[GRANT_PARAM] = make_grant(request.user)
        target = origin + request.path + (f"?{query.urlencode()}" if query else "")
        return HttpResponseRedirect(target)


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise serving the packages' static files (found where they are installed) and
    whatever `waybox manage collectstatic` put in logs/static, which it creates if missing."""

    def __init__(self, get_response=None, settings=settings):
        if settings.STATIC_ROOT:
            Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
        super().__init__(get_response, settings=settings)
