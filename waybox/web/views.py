"""The pages: index, snapshot, add, progress, first-run setup."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from waybox.models import ArchiveResult, Crawl, Snapshot, Tag
from waybox.web import access, actions, outputs, queries, setup
from waybox.web.access import require
from waybox.web.conf import archive_origin, data_dir, get_config
from waybox.web.files import archive_url, make_grant
from waybox.web.forms import AddForm, SetupForm

PAGE_SIZE = 50
MAX_TAG_CHOICES = 500
PROGRESS_CRAWLS = 20
PROGRESS_SNAPSHOTS = 50
PROGRESS_RECENT = 10


def grant_for(request: HttpRequest) -> str:
    """The signed grant archive links carry when archived files live on another origin."""
    if archive_origin() and request.user.is_authenticated:
        return make_grant(request.user)
    return ""


# -- index --------------------------------------------------------------------------------


@require_GET
@require(access.INDEX)
def index(request: HttpRequest) -> HttpResponse:
    params = {k: request.GET.get(k, "").strip() for k in ("q", "tag", "status", "since", "until", "crawl")}
    error = ""
    try:
        qs = queries.filter_snapshots(**{k: v or None for k, v in params.items()})
    except queries.FilterError as err:
        error = str(err)
        qs = Snapshot.objects.none()
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = queries.rows_for(list(page.object_list))
    grant = grant_for(request)
    can_view = access.allowed(request.user, access.SNAPSHOTS)
    for row in rows:
        row.favicon_url = archive_url(row.snapshot.id, row.favicon, grant) if row.favicon and can_view else ""
    filters = {k: v for k, v in params.items() if v}
    return render(request, "waybox/index.html", {
        "rows": rows,
        "page": page,
        "params": params,
        "filtered": bool(filters),
        "query_string": urlencode(filters),
        "error": error,
        "statuses": queries.SNAPSHOT_STATUSES,
        "tag_names": list(Tag.objects.order_by("name").values_list("name", flat=True)[:MAX_TAG_CHOICES]),
    })


# -- snapshot -----------------------------------------------------------------------------


@require_GET
@require(access.SNAPSHOTS)
def snapshot_detail(request: HttpRequest, snapshot_id) -> HttpResponse:
    snapshot = get_object_or_404(Snapshot.objects.select_related("crawl", "parent"), pk=snapshot_id)
    results = list(snapshot.results.select_related("process").order_by("hook_name"))
    folder = data_dir().snapshot_dir(snapshot.id)
    found, truncated = outputs.outputs_of(folder, results)
    grant = grant_for(request)

    def url(path: str) -> str:
        return archive_url(snapshot.id, path, grant)

    for out in found:
        out.url = url(out.main.path) if out.main else ""
        for f in out.files:
            f.url = url(f.path)
    media = [f for out in found for f in out.files if f.kind == "media"][:6]
    warcs = [f for out in found for f in out.files if f.kind == "warc"]
    now = timezone.now()
    for r in results:
        r.duration = _duration(r.started_at, r.ended_at or (now if r.status == "started" else None))
        r.files_shown = [(p, url(p)) for p in (r.output_files or [])[:50]]
        r.stderr_tail = (r.process.stderr_tail if r.process else "")[-4000:]
        r.log_url = url(f".hooks/{r.hook_name}.stderr.log") if r.process and request.user.is_authenticated else ""
    return render(request, "waybox/snapshot.html", {
        "snapshot": snapshot,
        "tags": [t.name for t in snapshot.tags.all()],
        "results": results,
        "outputs": found,
        "media": media,
        "warcs": warcs,
        "truncated": truncated,
        "plugins": sorted({r.plugin for r in results}),
        "folder_url": url(""),
        "index_url": url("index.json"),
        "sealed": snapshot.status == Snapshot.Status.SEALED,
    })


def _duration(start, end) -> str:
    if not start or not end:
        return ""
    seconds = (end - start).total_seconds()
    return f"{seconds:.1f}s" if seconds < 120 else f"{seconds / 60:.1f} min"


@require_POST
@require(access.MANAGE)
def snapshot_rerun(request: HttpRequest, snapshot_id) -> HttpResponse:
    snapshot = get_object_or_404(Snapshot, pk=snapshot_id)
    plugin = request.POST.get("plugin", "").strip()
    try:
        n = actions.rerun(snapshot, [plugin] if plugin else None)
    except actions.ActionError as err:
        messages.error(request, str(err))
    else:
        messages.success(request, f"Re-running {n} hook(s) of {plugin or 'every plugin'}.")
    return redirect("waybox:snapshot", snapshot_id=snapshot.id)


@require_POST
@require(access.MANAGE)
def snapshot_resnapshot(request: HttpRequest, snapshot_id) -> HttpResponse:
    snapshot = get_object_or_404(Snapshot, pk=snapshot_id)
    crawl = actions.resnapshot([snapshot], request.user)
    messages.success(request, "A new Snapshot of this URL is queued.")
    return redirect(f"{reverse('waybox:progress')}?crawl={crawl.id}")


@require(access.DELETE)
def snapshot_delete(request: HttpRequest, snapshot_id) -> HttpResponse:
    snapshot = get_object_or_404(Snapshot, pk=snapshot_id)
    if request.method == "POST":
        actions.delete_snapshots([snapshot.id])
        messages.success(request, f"Deleted the Snapshot of {snapshot.url}.")
        return redirect("waybox:index")
    preview = actions.delete_preview([snapshot.id])
    return render(request, "waybox/delete.html", {"snapshot": snapshot, "preview": preview})


# -- add ----------------------------------------------------------------------------------


def plugin_choices() -> list[tuple[str, str]]:
    config = get_config()
    names = sorted(config.registry.plugins) if config.registry else []
    return [(n, n if config.plugin_enabled(n) else f"{n} (disabled)") for n in names]


@require(access.ADD)
def add(request: HttpRequest) -> HttpResponse:
    form = AddForm(request.POST or None, request.FILES or None, plugin_choices=plugin_choices())
    skipped: list[dict] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data.get("file")
        try:
            outcome = actions.add_urls(
                text=form.cleaned_data.get("urls", ""),
                data=upload.read() if upload else None,
                filename=upload.name if upload else "",
                depth=form.cleaned_data["depth"],
                tags=form.tag_list,
                plugins=form.cleaned_data.get("plugins") or [],
                user=request.user,
            )
        except actions.ActionError as err:
            form.add_error(None, str(err))
        else:
            note = f" ({len(outcome.skipped)} line(s) skipped)" if outcome.skipped else ""
            messages.success(request, f"Queued {outcome.added} URL(s){note}.")
            if outcome.skipped:
                request.session["skipped"] = outcome.skipped[:50]
            if access.allowed(request.user, access.INDEX):
                return redirect(f"{reverse('waybox:progress')}?crawl={outcome.crawl.id}")
            return redirect("waybox:add")
    skipped = request.session.pop("skipped", []) if request.method == "GET" else []
    return render(request, "waybox/add.html", {"form": form, "skipped": skipped})


# -- progress -----------------------------------------------------------------------------


@require_GET
@require(access.INDEX)
def progress(request: HttpRequest) -> HttpResponse:
    crawl_id = request.GET.get("crawl", "")
    try:
        queries.parse_uuid(crawl_id, "crawl")
    except queries.FilterError:
        crawl_id = ""
    return render(request, "waybox/progress.html", {"crawl_id": crawl_id})


def _iso(value) -> str | None:
    return value.isoformat() if value else None


@require_GET
@require(access.INDEX)
def progress_json(request: HttpRequest) -> JsonResponse:
    """Running Crawls, Snapshots being archived with their running hooks, and recent ends.

    A fixed number of queries, each on an index, whatever the size of the collection.
    """
    now = timezone.now()
    try:
        focus = queries.parse_uuid(request.GET.get("crawl"), "crawl")
    except queries.FilterError as err:
        return JsonResponse({"error": str(err)}, status=400)
    crawls = list(Crawl.objects.exclude(status=Crawl.Status.SEALED).order_by("-created_at")[:PROGRESS_CRAWLS])
    if focus and focus not in {c.id for c in crawls}:
        crawls[:0] = list(Crawl.objects.filter(pk=focus))
    crawl_ids = [c.id for c in crawls]
    per_crawl: dict = {}
    for cid, status, n in (Snapshot.objects.filter(crawl_id__in=crawl_ids).order_by()
                           .values_list("crawl_id", "status").annotate(n=Count("id"))):
        per_crawl.setdefault(cid, {})[status] = n
    active = Snapshot.objects.filter(status=Snapshot.Status.STARTED)
    if focus:
        active = Snapshot.objects.filter(crawl_id=focus).exclude(status=Snapshot.Status.SEALED)
    snapshots = list(active.order_by("created_at")[:PROGRESS_SNAPSHOTS])
    hooks: dict = {}
    running = ArchiveResult.objects.filter(status=ArchiveResult.Status.STARTED).filter(
        _q_owner([s.id for s in snapshots], crawl_ids)
    ).order_by("started_at")
    for r in running:
        key = r.snapshot_id or r.crawl_id
        hooks.setdefault(key, []).append({
            "plugin": r.plugin, "hook": r.hook_name, "attempts": r.attempts, "started_at": _iso(r.started_at),
            "elapsed": round((now - r.started_at).total_seconds(), 1) if r.started_at else None,
        })
    recent_crawls = [focus] if focus else list(Crawl.objects.order_by("-created_at").values_list("id", flat=True)[:5])
    recent = list(Snapshot.objects.filter(crawl_id__in=recent_crawls, status=Snapshot.Status.SEALED)
                  .order_by("-ended_at")[:PROGRESS_RECENT if not focus else PROGRESS_SNAPSHOTS])
    return JsonResponse({
        "now": _iso(now),
        "queued": Snapshot.objects.filter(status=Snapshot.Status.QUEUED).count() if not focus else None,
        "crawls": [{
            "id": str(c.id), "status": c.status, "url": (c.urls.splitlines() or [""])[0],
            "urls": len(c.urls.splitlines()), "depth": c.max_depth, "current_step": c.current_step,
            "created_at": _iso(c.created_at), "started_at": _iso(c.started_at), "ended_at": _iso(c.ended_at),
            "snapshots": per_crawl.get(c.id, {}), "hooks": hooks.get(c.id, []),
        } for c in crawls],
        "snapshots": [{
            "id": str(s.id), "url": s.url, "title": s.title, "status": s.status, "current_step": s.current_step,
            "started_at": _iso(s.started_at), "hooks": hooks.get(s.id, []),
            "href": reverse("waybox:snapshot", args=[s.id]),
        } for s in snapshots],
        "recent": [{
            "id": str(s.id), "url": s.url, "title": s.title, "status": s.status, "ended_at": _iso(s.ended_at),
            "href": reverse("waybox:snapshot", args=[s.id]),
        } for s in recent],
    })


def _q_owner(snapshot_ids: list, crawl_ids: list) -> Q:
    return Q(snapshot_id__in=snapshot_ids) | Q(snapshot__isnull=True, crawl_id__in=crawl_ids)


# -- first run ----------------------------------------------------------------------------


def first_run(request: HttpRequest) -> HttpResponse:
    datadir = data_dir()
    token = request.GET.get("token") or request.POST.get("token", "")
    if not setup.needs_setup() or not setup.check_token(datadir, token):
        raise Http404("no setup pending")
    form = SetupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            if get_user_model().objects.exists():
                raise Http404("no setup pending")
            user = get_user_model().objects.create_superuser(
                form.cleaned_data["username"], form.cleaned_data.get("email", ""), form.cleaned_data["password1"]
            )
        setup.discard_token(datadir)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.get_username()}: your account is ready. Add a first URL.")
        return redirect("waybox:add")
    return render(request, "waybox/setup.html", {"form": form, "token": token})


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})
