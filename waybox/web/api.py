"""The REST API, /api/v1/ (django-ninja; OpenAPI docs at /api/v1/docs).

Authentication: `Authorization: Bearer <token>` (tokens from `waybox token create` or the
admin), or the browser's session (then unsafe methods need the CSRF token). A wrong, expired
or revoked token is always 401, even where anonymous access is allowed. Anonymous callers
get what PUBLIC_INDEX / PUBLIC_SNAPSHOTS / PUBLIC_ADD grant; Crawls and Processes never.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db.models import Count
from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import Field, NinjaAPI, Query, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.security import HttpBearer

from waybox import __version__
from waybox.models import APIToken, ArchiveResult, Crawl, Process, Snapshot, Tag
from waybox.web import access, actions, queries
from waybox.web.files import archive_url
from waybox.web.search import search_snapshots

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
MAX_LIMIT = 500


class Access(HttpBearer):
    """Token, session or (where PUBLIC_* allow) nobody: who is calling, and may they do `what`."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def __call__(self, request: HttpRequest) -> Any:
        header = request.headers.get("Authorization", "")
        user = None
        if header:
            scheme, _, secret = header.partition(" ")
            if scheme.lower() != "bearer" or not secret.strip():
                raise AuthenticationError(message="use the header `Authorization: Bearer <token>`")
            token = APIToken.authenticate(secret.strip())
            if token is None:
                raise AuthenticationError(message="invalid, expired or revoked API token")
            user = request.user = token.user
        elif request.user.is_authenticated:
            if request.method not in SAFE_METHODS:
                check = CsrfViewMiddleware(lambda r: None)
                request.csrf_processing_done = False
                check.process_request(request)
                if check.process_view(request, lambda r: None, (), {}) is not None:
                    raise HttpError(403, "CSRF check failed: send the X-CSRFToken header, or use an API token")
            user = request.user
        if access.allowed(user, self.what):
            return user or "anonymous"
        if user is not None:
            raise HttpError(403, f"this account may not {self.what}")
        return None

    def authenticate(self, request: HttpRequest, token: str) -> Any:  # required by HttpBearer
        return None


api = NinjaAPI(
    title="waybox API",
    version="1",
    description="Add URLs, browse and manage Snapshots, their ArchiveResults, Tags, Crawls and Processes. "
                "Authenticate with `Authorization: Bearer <token>` (create one with `waybox token create`).",
    urls_namespace="api",
    docs_url="/docs",
)
INDEX, SNAPSHOTS, ADD, MANAGE, DELETE = (Access(w) for w in (
    access.INDEX, access.SNAPSHOTS, access.ADD, access.MANAGE, access.DELETE))


@api.exception_handler(queries.FilterError)
def filter_error(request: HttpRequest, exc: queries.FilterError):
    return api.create_response(request, {"detail": str(exc)}, status=400)


@api.exception_handler(actions.ActionError)
def action_error(request: HttpRequest, exc: actions.ActionError):
    return api.create_response(request, {"detail": str(exc)}, status=400)


# -- schemas --------------------------------------------------------------------------------


class Page(Schema):
    limit: int = Field(50, ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0)


class SnapshotFilters(Page):
    q: str | None = Field(None, description="Words that must appear in the URL or title.")
    tag: str | None = None
    status: str | None = Field(None, description="queued, started, sealed, or failed (has a failed result).")
    since: str | None = Field(None, description="Created on or after this ISO date.")
    until: str | None = Field(None, description="Created on or before this ISO date.")
    crawl_id: str | None = None


class ResultOut(Schema):
    id: uuid.UUID
    snapshot_id: uuid.UUID | None
    crawl_id: uuid.UUID | None
    plugin: str
    hook_name: str
    status: str
    attempts: int
    retry_at: datetime | None
    output_str: str
    output_json: Any = None
    output_files: list[str]
    started_at: datetime | None
    ended_at: datetime | None
    process_id: uuid.UUID | None
    stderr_tail: str = ""


class SnapshotOut(Schema):
    id: uuid.UUID
    url: str
    title: str
    status: str
    current_step: int
    depth: int
    crawl_id: uuid.UUID
    parent_id: uuid.UUID | None
    tags: list[str]
    output_size: int
    created_at: datetime
    bookmarked_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    ui_url: str
    archive_url: str


class SnapshotDetail(SnapshotOut):
    archiveresults: list[ResultOut]


class SnapshotList(Schema):
    count: int
    limit: int
    offset: int
    items: list[SnapshotOut]


class AddIn(Schema):
    urls: list[str] = Field(default_factory=list, description="URLs to archive.")
    text: str = Field("", description="An import to parse instead or as well: URL list, bookmarks HTML, RSS, "
                                      "JSON, CSV...")
    depth: int = Field(0, ge=0, le=actions.MAX_DEPTH)
    tags: list[str] = Field(default_factory=list)
    plugins: list[str] = Field(default_factory=list, description="Run only these plugins (default: all enabled).")


class Skipped(Schema):
    where: str
    text: str
    reason: str


class AddOut(Schema):
    crawl_id: uuid.UUID
    added: int
    skipped: list[Skipped]
    progress_url: str


class SnapshotPatch(Schema):
    title: str | None = Field(None, max_length=1000)
    tags: list[str] | None = None


class RerunIn(Schema):
    plugins: list[str] = Field(default_factory=list, description="Only these plugins' hooks (default: all).")


class Queued(Schema):
    queued: int


class CrawlOut(Schema):
    id: uuid.UUID
    status: str
    urls: list[str]
    source: str
    max_depth: int
    tags: list[str]
    config: dict
    current_step: int
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    snapshots: dict[str, int] = Field(default_factory=dict, description="Snapshot count per status.")


class TagOut(Schema):
    name: str
    snapshots: int


class ProcessOut(Schema):
    id: uuid.UUID
    parent_id: uuid.UUID | None
    process_type: str
    status: str
    pid: int | None
    exit_code: int | None
    cmd: list
    pwd: str
    started_at: datetime | None
    ended_at: datetime | None
    stderr_tail: str


class Message(Schema):
    detail: str


# -- conversions ----------------------------------------------------------------------------


def snapshot_out(s: Snapshot, tags: list[str]) -> dict:
    return {
        "id": s.id, "url": s.url, "title": s.title, "status": s.status, "current_step": s.current_step,
        "depth": s.depth, "crawl_id": s.crawl_id, "parent_id": s.parent_id, "tags": tags,
        "output_size": s.output_size, "created_at": s.created_at, "bookmarked_at": s.bookmarked_at,
        "started_at": s.started_at, "ended_at": s.ended_at,
        "ui_url": reverse("waybox:snapshot", args=[s.id]), "archive_url": archive_url(s.id),
    }


def result_out(r: ArchiveResult) -> dict:
    return {
        "id": r.id, "snapshot_id": r.snapshot_id, "crawl_id": r.crawl_id, "plugin": r.plugin,
        "hook_name": r.hook_name, "status": r.status, "attempts": r.attempts, "retry_at": r.retry_at,
        "output_str": r.output_str, "output_json": r.output_json, "output_files": r.output_files or [],
        "started_at": r.started_at, "ended_at": r.ended_at, "process_id": r.process_id,
        "stderr_tail": r.process.stderr_tail if r.process_id and r.process else "",
    }


def snapshot_page(qs, page: Page) -> dict:
    items = list(qs[page.offset : page.offset + page.limit])
    rows = queries.rows_for(items)
    return {"count": qs.count(), "limit": page.limit, "offset": page.offset,
            "items": [snapshot_out(r.snapshot, r.tags) for r in rows]}


def crawl_out(c: Crawl, counts: dict | None = None) -> dict:
    return {
        "id": c.id, "status": c.status, "urls": c.urls.splitlines(), "source": c.source, "max_depth": c.max_depth,
        "tags": c.tag_names, "config": c.config, "current_step": c.current_step, "created_at": c.created_at,
        "started_at": c.started_at, "ended_at": c.ended_at, "snapshots": counts or {},
    }


# -- endpoints ------------------------------------------------------------------------------


@api.get("/", auth=None, tags=["meta"], summary="API version")
def root(request: HttpRequest):
    return {"name": "waybox", "version": __version__, "api": "v1", "docs": reverse("api:openapi-view")}


@api.post("/add", auth=ADD, response={201: AddOut}, tags=["add"], summary="Add URLs (one new Crawl)")
def add(request: HttpRequest, body: AddIn):
    if not body.urls and not body.text.strip():
        raise HttpError(400, "give `urls` (a list of URLs) or `text` (an import to parse)")
    from waybox.urlinput import InvalidURL, normalize_url

    good, skipped = [], []
    for i, url in enumerate(body.urls):
        try:
            good.append(normalize_url(url))
        except InvalidURL as err:
            skipped.append({"where": f"urls[{i}]", "text": url[:300], "reason": str(err)})
    text = "\n".join(good) + ("\n" + body.text if body.text.strip() else "")
    if not good and not body.text.strip():
        raise HttpError(400, "no valid URLs: " + "; ".join(f"{s['where']}: {s['reason']}" for s in skipped))
    user = request.user if request.user.is_authenticated else None
    outcome = actions.add_urls(text=text, depth=body.depth, tags=body.tags, plugins=body.plugins, user=user,
                               source="api")
    return 201, {"crawl_id": outcome.crawl.id, "added": outcome.added, "skipped": skipped + outcome.skipped,
                 "progress_url": f"{reverse('waybox:progress')}?crawl={outcome.crawl.id}"}


@api.get("/snapshots", auth=INDEX, response=SnapshotList, tags=["snapshots"], summary="List Snapshots")
def list_snapshots(request: HttpRequest, filters: Query[SnapshotFilters]):
    qs = queries.filter_snapshots(q=filters.q, tag=filters.tag, status=filters.status, since=filters.since,
                                  until=filters.until, crawl=filters.crawl_id)
    return snapshot_page(qs, filters)


@api.get("/search", auth=INDEX, response=SnapshotList, tags=["snapshots"], summary="Search Snapshots")
def search(request: HttpRequest, q: str, page: Query[Page]):
    return snapshot_page(search_snapshots(q).order_by("-created_at"), page)


def _snapshot(snapshot_id: uuid.UUID) -> Snapshot:
    return get_object_or_404(Snapshot, pk=snapshot_id)


@api.get("/snapshots/{snapshot_id}", auth=SNAPSHOTS, response=SnapshotDetail, tags=["snapshots"],
         summary="One Snapshot with its ArchiveResults")
def get_snapshot(request: HttpRequest, snapshot_id: uuid.UUID):
    s = _snapshot(snapshot_id)
    results = s.results.select_related("process").order_by("hook_name")
    return {**snapshot_out(s, [t.name for t in s.tags.all()]), "archiveresults": [result_out(r) for r in results]}


@api.patch("/snapshots/{snapshot_id}", auth=MANAGE, response=SnapshotOut, tags=["snapshots"],
           summary="Change a Snapshot's title or tags")
def patch_snapshot(request: HttpRequest, snapshot_id: uuid.UUID, body: SnapshotPatch):
    from waybox.enqueue import clean_tags, get_tags

    s = _snapshot(snapshot_id)
    if body.title is not None:
        Snapshot.objects.filter(pk=s.pk).update(title=body.title)
        s.title = body.title
    if body.tags is not None:
        s.tags.set(get_tags(clean_tags(body.tags)))
    return snapshot_out(s, [t.name for t in s.tags.all()])


@api.delete("/snapshots/{snapshot_id}", auth=DELETE, response={204: None}, tags=["snapshots"],
            summary="Delete a Snapshot and its files")
def delete_snapshot(request: HttpRequest, snapshot_id: uuid.UUID):
    actions.delete_snapshots([_snapshot(snapshot_id).id])
    return 204, None


@api.post("/snapshots/{snapshot_id}/rerun", auth=MANAGE, response={202: Queued, 409: Message},
          tags=["snapshots"], summary="Run a Snapshot's hooks again (all, or some plugins')")
def rerun(request: HttpRequest, snapshot_id: uuid.UUID, body: RerunIn | None = None):
    s = _snapshot(snapshot_id)
    plugins = body.plugins if body else []
    if s.status != Snapshot.Status.SEALED:
        return 409, {"detail": "this Snapshot is still being archived; re-run it when it is sealed"}
    return 202, {"queued": actions.rerun(s, plugins or None)}


@api.post("/snapshots/{snapshot_id}/resnapshot", auth=MANAGE, response={201: AddOut}, tags=["snapshots"],
          summary="Capture the URL again, as a new Snapshot in a new Crawl")
def resnapshot(request: HttpRequest, snapshot_id: uuid.UUID):
    crawl = actions.resnapshot([_snapshot(snapshot_id)], request.user)
    return 201, {"crawl_id": crawl.id, "added": 1, "skipped": [],
                 "progress_url": f"{reverse('waybox:progress')}?crawl={crawl.id}"}


class ResultFilters(Page):
    snapshot_id: uuid.UUID | None = None
    plugin: str | None = None
    status: str | None = None


@api.get("/archiveresults", auth=SNAPSHOTS, response=list[ResultOut], tags=["archiveresults"],
         summary="List ArchiveResults")
def list_results(request: HttpRequest, filters: Query[ResultFilters]):
    qs = ArchiveResult.objects.select_related("process").order_by("-created_at")
    if filters.snapshot_id:
        qs = qs.filter(snapshot_id=filters.snapshot_id)
    if filters.plugin:
        qs = qs.filter(plugin=filters.plugin)
    if filters.status:
        if filters.status not in ArchiveResult.Status.values:
            raise HttpError(400, f"status must be one of {', '.join(ArchiveResult.Status.values)}")
        qs = qs.filter(status=filters.status)
    return [result_out(r) for r in qs[filters.offset : filters.offset + filters.limit]]


@api.get("/archiveresults/{result_id}", auth=SNAPSHOTS, response=ResultOut, tags=["archiveresults"],
         summary="One ArchiveResult")
def get_result(request: HttpRequest, result_id: uuid.UUID):
    return result_out(get_object_or_404(ArchiveResult.objects.select_related("process"), pk=result_id))


@api.get("/tags", auth=INDEX, response=list[TagOut], tags=["tags"], summary="Tags and how many Snapshots have each")
def list_tags(request: HttpRequest, page: Query[Page]):
    qs = Tag.objects.annotate(n=Count("snapshots")).order_by("name")[page.offset : page.offset + page.limit]
    return [{"name": t.name, "snapshots": t.n} for t in qs]


class CrawlFilters(Page):
    status: str | None = None


@api.get("/crawls", auth=MANAGE, response=list[CrawlOut], tags=["crawls"], summary="List Crawls")
def list_crawls(request: HttpRequest, filters: Query[CrawlFilters]):
    qs = Crawl.objects.order_by("-created_at")
    if filters.status:
        if filters.status not in Crawl.Status.values:
            raise HttpError(400, f"status must be one of {', '.join(Crawl.Status.values)}")
        qs = qs.filter(status=filters.status)
    crawls = list(qs[filters.offset : filters.offset + filters.limit])
    counts: dict = {}
    for cid, status, n in (Snapshot.objects.filter(crawl_id__in=[c.id for c in crawls]).order_by()
                           .values_list("crawl_id", "status").annotate(n=Count("id"))):
        counts.setdefault(cid, {})[status] = n
    return [crawl_out(c, counts.get(c.id)) for c in crawls]


@api.get("/crawls/{crawl_id}", auth=MANAGE, response=CrawlOut, tags=["crawls"], summary="One Crawl")
def get_crawl(request: HttpRequest, crawl_id: uuid.UUID):
    crawl = get_object_or_404(Crawl, pk=crawl_id)
    counts = dict(Snapshot.objects.filter(crawl=crawl).order_by().values_list("status").annotate(n=Count("id")))
    return crawl_out(crawl, counts)


class ProcessFilters(Page):
    status: str | None = None
    process_type: str | None = Field(None, alias="type")


def process_out(p: Process) -> dict:
    return {"id": p.id, "parent_id": p.parent_id, "process_type": p.process_type, "status": p.status, "pid": p.pid,
            "exit_code": p.exit_code, "cmd": p.cmd if isinstance(p.cmd, list) else [str(p.cmd)], "pwd": p.pwd,
            "started_at": p.started_at, "ended_at": p.ended_at, "stderr_tail": p.stderr_tail}


@api.get("/processes", auth=MANAGE, response=list[ProcessOut], tags=["processes"], summary="List Processes")
def list_processes(request: HttpRequest, filters: Query[ProcessFilters]):
    qs = Process.objects.order_by("-created_at")
    if filters.status:
        if filters.status not in Process.Status.values:
            raise HttpError(400, f"status must be one of {', '.join(Process.Status.values)}")
        qs = qs.filter(status=filters.status)
    if filters.process_type:
        if filters.process_type not in Process.Type.values:
            raise HttpError(400, f"type must be one of {', '.join(Process.Type.values)}")
        qs = qs.filter(process_type=filters.process_type)
    return [process_out(p) for p in qs[filters.offset : filters.offset + filters.limit]]


@api.get("/processes/{process_id}", auth=MANAGE, response=ProcessOut, tags=["processes"], summary="One Process")
def get_process(request: HttpRequest, process_id: uuid.UUID):
    return process_out(get_object_or_404(Process, pk=process_id))
