"""Serving archived files: hostile content, so sandboxed and confined to its Snapshot folder.

Every response from `/archive/<snapshot_id>/<path>` carries a Content-Security-Policy with
`sandbox` (and no `allow-same-origin`): the browser gives the document an opaque origin, so
its scripts can neither read this site's cookies nor make credentialed requests to the UI or
the API. `nosniff` stops a `.txt` from being run as HTML. Paths are resolved (symlinks too)
and must stay inside the Snapshot's folder.

With ARCHIVE_ORIGIN set, archived files are served only on that origin. Its visitors are not
logged in there (cookies belong to the UI's host), so links from the UI carry a short-lived
signed `grant`, which the archive origin turns into its own cookie, good only for reading
archived files.
"""

from __future__ import annotations

import html
import mimetypes
import os
import re
import stat
from pathlib import Path, PurePosixPath
from urllib.parse import quote, urlencode, urlsplit

from django.core import signing
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotModified,
    HttpResponseRedirect,
)
from django.utils.http import http_date
from django.views.static import was_modified_since

from waybox.web.access import SNAPSHOTS, allowed
from waybox.web.conf import archive_origin, data_dir

SANDBOX = (
    "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-modals "
    "allow-downloads allow-pointer-lock allow-presentation"
)
ARCHIVE_CSP = (
    f"{SANDBOX}; default-src 'self' data: blob: 'unsafe-inline' 'unsafe-eval'; "
    "form-action 'none'; base-uri 'self'; frame-ancestors "
)
GRANT_PARAM = "grant"
GRANT_COOKIE = "waybox_archive"
GRANT_SALT = "waybox.archive-grant"
GRANT_MAX_AGE_S = 12 * 3600
DOWNLOAD_SUFFIXES = (".warc", ".warc.gz", ".gz", ".zip", ".tar", ".wacz", ".cdx")
TEXT_TYPES = ("text/plain", "text/csv", "text/markdown", "application/json", "text/css", "text/javascript")
RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")
MAX_LISTING = 2000

mimetypes.add_type("application/warc", ".warc")
mimetypes.add_type("application/json", ".jsonl")
mimetypes.add_type("text/markdown", ".md")
mimetypes.add_type("image/webp", ".webp")


def content_type_of(path: Path) -> tuple[str, bool]:
    """(Content-Type, download?) for a file: unknown types are never sniffed into HTML."""
    name = path.name.lower()
    download = name.endswith(DOWNLOAD_SUFFIXES)
    kind, encoding = mimetypes.guess_type(name)
    if encoding or not kind:
        return ("application/gzip" if encoding == "gzip" else "application/octet-stream"), True
    if kind in TEXT_TYPES or (kind.startswith("text/") and kind != "text/html"):
        kind += "; charset=utf-8"
    return kind, download


def resolve_in_snapshot(snapshot_id: object, relpath: str) -> Path:
    """The real file or folder `relpath` names inside the Snapshot's folder, or Http404.

    `..`, absolute paths, NUL bytes and symlinks leading outside the folder all end here.
    """
    base = data_dir().snapshot_dir(snapshot_id)
    try:
        base_real = base.resolve(strict=True)
    except (OSError, RuntimeError):
        raise Http404("no archive folder for this Snapshot") from None
    if "\x00" in relpath or relpath.startswith(("/", "\\")):
        raise Http404("bad path")
    parts = PurePosixPath(relpath).parts
    if any(p in ("..",) for p in parts):
        raise Http404("bad path")
    try:
        target = (base_real / relpath).resolve(strict=True)
    except (OSError, RuntimeError):
        raise Http404("no such file") from None
    if target != base_real and not target.is_relative_to(base_real):
        raise Http404("no such file")
    return target


def archive_headers(response: HttpResponse) -> HttpResponse:
    # the UI frames previews of archived pages; from a separate origin it is another origin
    response["Content-Security-Policy"] = ARCHIVE_CSP + ("*" if archive_origin() else "'self'")
    response["X-Content-Type-Options"] = "nosniff"
    response["Referrer-Policy"] = "no-referrer"
    if not archive_origin():
        response["X-Frame-Options"] = "SAMEORIGIN"
    response["Cross-Origin-Opener-Policy"] = "same-origin"
    response["Cache-Control"] = "private, no-cache"
    return response


# -- grants for a separate archive origin -------------------------------------------------


def make_grant(user) -> str:
    return signing.TimestampSigner(salt=GRANT_SALT).sign(str(user.pk))


def user_of_grant(value: str):
    from django.contrib.auth import get_user_model

    try:
        pk = signing.TimestampSigner(salt=GRANT_SALT).unsign(value, max_age=GRANT_MAX_AGE_S)
    except signing.BadSignature:
        return None
    return get_user_model().objects.filter(pk=pk, is_active=True).first()


def archive_url(snapshot_id: object, relpath: str = "", grant: str = "") -> str:
    """Where an archived file is served: this origin, or ARCHIVE_ORIGIN (with the user's grant)."""
    url = f"/archive/{snapshot_id}/{quote(relpath)}"
    origin = archive_origin()
    if origin:
        url = origin + url + (f"?{urlencode({GRANT_PARAM: grant})}" if grant else "")
    return url


def is_archive_host(request: HttpRequest) -> bool:
    origin = archive_origin()
    return bool(origin) and request.get_host().lower() == urlsplit(origin).netloc.lower()


def archive_viewer(request: HttpRequest):
    """The user reading archived files: logged in here, or holding a grant cookie (archive origin)."""
    if request.user.is_authenticated:
        return request.user
    if is_archive_host(request):
        value = request.COOKIES.get(GRANT_COOKIE, "")
        return user_of_grant(value) if value else None
    return None


# -- the view -------------------------------------------------------------------------------


def serve_archive(request: HttpRequest, snapshot_id, path: str = "") -> HttpResponse:
    from waybox.models import Snapshot

    grant = request.GET.get(GRANT_PARAM)
    viewer = None
    if grant and is_archive_host(request):
        if request.headers.get("Sec-Fetch-Dest", "document") == "document":
            return _accept_grant(request, grant)
        # an image, a video or a framed preview on a UI page: from another site, such requests
        # carry no SameSite=Lax cookie, so the grant itself is the credential
        viewer = user_of_grant(grant)
    viewer = viewer or archive_viewer(request)
    if not allowed(viewer, SNAPSHOTS):
        if is_archive_host(request):
            return archive_headers(HttpResponse("Open archived files from the waybox UI (you are not logged in "
                                                "on this origin, or your link expired).", status=403,
                                                content_type="text/plain; charset=utf-8"))
        from django.contrib.auth.views import redirect_to_login

        return redirect_to_login(request.get_full_path())
    if any(part.startswith(".") for part in PurePosixPath(path).parts) and viewer is None:
        raise Http404("no such file")  # hook logs are for logged-in users
    if not Snapshot.objects.filter(pk=snapshot_id).exists():
        raise Http404("no such Snapshot")
    target = resolve_in_snapshot(snapshot_id, path)
    if target.is_dir():
        if path and not path.endswith("/"):
            return HttpResponseRedirect(request.path + "/")
        index = target / "index.html"
        if index.is_file():
            return _file_response(request, index)
        return _listing(request, target, path, show_hidden=viewer is not None)
    return _file_response(request, target)


def _accept_grant(request: HttpRequest, grant: str) -> HttpResponse:
    user = user_of_grant(grant)
    if user is None:
        return archive_headers(HttpResponse("This archive link has expired: open it again from the waybox UI.",
                                            status=403, content_type="text/plain; charset=utf-8"))
    query = request.GET.copy()
    query.pop(GRANT_PARAM, None)
    target = request.path + (f"?{query.urlencode()}" if query else "")
    response = HttpResponseRedirect(target)
    response.set_cookie(GRANT_COOKIE, grant, max_age=GRANT_MAX_AGE_S, httponly=True, samesite="Lax",
                        path="/archive/", secure=request.is_secure())
    return archive_headers(response)


def _file_response(request: HttpRequest, path: Path) -> HttpResponse:
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise Http404("not a file")
    if not was_modified_since(request.META.get("HTTP_IF_MODIFIED_SINCE"), int(st.st_mtime)):
        return archive_headers(HttpResponseNotModified())
    kind, download = content_type_of(path)
    size = st.st_size
    start, end = 0, size - 1
    partial = False
    match = RANGE_RE.match(request.headers.get("Range", "").strip())
    if match and size:
        first, last = match.groups()
        if first:
            start, end = int(first), min(int(last), size - 1) if last else size - 1
        elif last:
            start, end = max(0, size - int(last)), size - 1
        if start > end or start >= size:
            response = HttpResponse(status=416)
            response["Content-Range"] = f"bytes */{size}"
            return archive_headers(response)
        partial = True
    handle = open(path, "rb")  # noqa: SIM115 - closed by FileResponse
    if partial:
        handle.seek(start)
        response = FileResponse(_limited(handle, end - start + 1), status=206, content_type=kind)
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
        response["Content-Length"] = str(end - start + 1)
    else:
        response = FileResponse(handle, content_type=kind)
        response["Content-Length"] = str(size)
    response["Accept-Ranges"] = "bytes"
    response["Last-Modified"] = http_date(st.st_mtime)
    if download:
        response["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(path.name)}"
    return archive_headers(response)


def _limited(handle, length: int):
    """The next `length` bytes of an open file, in chunks, closing it at the end."""
    try:
        while length > 0:
            chunk = handle.read(min(64 * 1024, length))
            if not chunk:
                break
            length -= len(chunk)
            yield chunk
    finally:
        handle.close()


def _listing(request: HttpRequest, folder: Path, relpath: str, *, show_hidden: bool) -> HttpResponse:
    """A plain list of a folder's entries (no scripts), served sandboxed like everything here."""
    entries = []
    with os.scandir(folder) as it:
        for entry in sorted(it, key=lambda e: (not e.is_dir(), e.name)):
            if entry.name.startswith(".") and not show_hidden:
                continue
            entries.append(entry)
            if len(entries) >= MAX_LISTING:
                break
    rows = []
    for entry in entries:
        name = entry.name + ("/" if entry.is_dir() else "")
        size = "" if entry.is_dir() else f"{entry.stat().st_size:,} bytes"
        rows.append(f'<li><a href="{html.escape(quote(name))}">{html.escape(name)}</a> <small>{size}</small></li>')
    title = html.escape("/" + relpath)
    parent = '<li><a href="../">../</a></li>' if relpath else ""
    body = (f"<!doctype html><meta charset=utf-8><title>{title}</title>"
            f"<h1 style='font:16px sans-serif'>{title}</h1>"
            f"<ul style='font:14px monospace'>{parent}{''.join(rows)}</ul>")
    return archive_headers(HttpResponse(body, content_type="text/html; charset=utf-8"))
