"""The Django admin: every model, and for Process a tree view of one process's family.

Process, Machine and Binary rows are records of what happened on a machine, so they are
read-only here: editing a pid or an exit code would only make the record lie.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from waybox.models import APIToken, ArchiveResult, Binary, Crawl, Machine, Process, Snapshot, Tag

CMD_SUMMARY_CHARS = 80

admin.site.site_header = "waybox admin"
admin.site.site_title = "waybox admin"
admin.site.index_title = "Everything waybox stores"


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by waybox itself: viewable and deletable, never hand-edited or added."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Crawl)
class CrawlAdmin(admin.ModelAdmin):
    list_display = ["id", "status", "first_url", "max_depth", "current_step", "tags_str", "created_at"]
    list_filter = ["status", "max_depth"]
    search_fields = ["id", "urls", "source", "tags_str"]
    raw_id_fields = ["created_by", "lease_owner"]
    date_hierarchy = "created_at"

    @admin.display(description="first URL")
    def first_url(self, obj: Crawl) -> str:
        return obj.urls.splitlines()[0] if obj.urls else ""


class ArchiveResultInline(admin.TabularInline):
    model = ArchiveResult
    fields = ["hook_name", "status", "attempts", "output_str", "started_at", "ended_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin):
    list_display = ["url", "title", "status", "current_step", "depth", "created_at", "ui_link"]
    list_filter = ["status", "current_step", "depth", "tags"]
    search_fields = ["id", "url", "title"]
    raw_id_fields = ["crawl", "parent", "lease_owner"]
    filter_horizontal = ["tags"]
    date_hierarchy = "created_at"
    inlines = [ArchiveResultInline]
    actions = ["retry_failed", "rerun_all", "resnapshot", "delete_with_files"]

    @admin.display(description="page")
    def ui_link(self, obj: Snapshot) -> str:
        return format_html('<a href="{}">open</a>', reverse("waybox:snapshot", args=[obj.pk]))

    def get_actions(self, request: HttpRequest):
        found = super().get_actions(request)
        found.pop("delete_selected", None)  # it would leave the archive folders behind
        return found

    @admin.action(description="Retry failed results of selected Snapshots")
    def retry_failed(self, request: HttpRequest, queryset) -> None:
        from waybox.web.actions import ActionError, rerun

        done, refused = 0, 0
        for snapshot in queryset:
            failed = list(snapshot.results.filter(status=ArchiveResult.Status.FAILED).values_list("pk", flat=True))
            if not failed:
                continue
            try:
                done += rerun(snapshot, result_ids=failed)
            except ActionError:
                refused += 1
        self.message_user(request, f"{done} failed result(s) queued to run again"
                          + (f"; {refused} Snapshot(s) still being archived were left alone" if refused else ""),
                          messages.SUCCESS if done else messages.WARNING)

    @admin.action(description="Re-run every plugin of selected Snapshots")
    def rerun_all(self, request: HttpRequest, queryset) -> None:
        from waybox.web.actions import ActionError, rerun

        done, refused = 0, 0
        for snapshot in queryset:
            try:
                rerun(snapshot)
                done += 1
            except ActionError:
                refused += 1
        self.message_user(request, f"{done} Snapshot(s) re-running"
                          + (f"; {refused} still being archived were left alone" if refused else ""))

    @admin.action(description="Re-snapshot: capture the selected URLs again (new Crawl)")
    def resnapshot(self, request: HttpRequest, queryset) -> None:
        from waybox.web.actions import resnapshot

        crawl = resnapshot(queryset.prefetch_related("tags"), request.user)
        self.message_user(request, format_html('New crawl queued: <a href="{}?crawl={}">watch its progress</a>',
                                               reverse("waybox:progress"), crawl.pk))

    @admin.action(description="Delete selected Snapshots and their files…", permissions=["delete"])
    def delete_with_files(self, request: HttpRequest, queryset):
        """A preview of what goes (rows, results, bytes on disk), then the deletion on confirm."""
        from waybox.web.actions import delete_preview, delete_snapshots

        ids = list(queryset.values_list("pk", flat=True))
        if request.POST.get("confirmed") == "yes":
            n = delete_snapshots(ids)
            self.message_user(request, f"Deleted {n} Snapshot(s) and their archive folders.", messages.SUCCESS)
            return None
        preview = delete_preview(ids)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Delete Snapshots and their files?",
            "preview": preview,
            "shown": preview["snapshots"][:100],
            "ids": ids,
            "action": "delete_with_files",
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/waybox/snapshot/delete_preview.html", context)

    def delete_model(self, request: HttpRequest, obj: Snapshot) -> None:
        from waybox.web.actions import delete_snapshots

        delete_snapshots([obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        from waybox.web.actions import delete_snapshots

        delete_snapshots(list(queryset.values_list("pk", flat=True)))


@admin.register(ArchiveResult)
class ArchiveResultAdmin(admin.ModelAdmin):
    list_display = ["hook_name", "plugin", "status", "attempts", "snapshot", "process_link", "started_at", "ended_at"]
    list_filter = ["status", "plugin"]
    search_fields = ["hook_name", "plugin", "output_str", "snapshot__url"]
    raw_id_fields = ["snapshot", "crawl", "process", "lease_owner"]
    actions = ["retry_selected"]

    @admin.action(description="Run selected results again")
    def retry_selected(self, request: HttpRequest, queryset) -> None:
        from waybox.web.actions import ActionError, rerun

        by_snapshot: dict = {}
        for result in queryset.exclude(snapshot=None).select_related("snapshot"):
            by_snapshot.setdefault(result.snapshot_id, (result.snapshot, []))[1].append(result.pk)
        done, refused = 0, 0
        for snapshot, ids in by_snapshot.values():
            try:
                done += rerun(snapshot, result_ids=ids)
            except ActionError:
                refused += 1
        self.message_user(request, f"{done} result(s) queued to run again"
                          + (f"; {refused} Snapshot(s) still being archived were left alone" if refused else ""),
                          messages.SUCCESS if done else messages.WARNING)

    @admin.display(description="process")
    def process_link(self, obj: ArchiveResult) -> str:
        return _process_link(obj.process) if obj.process_id else "-"


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


@admin.register(APIToken)
class APITokenAdmin(admin.ModelAdmin):
    """Tokens are created here (the secret is shown once, in a message) and revoked, never edited."""

    list_display = ["prefix", "name", "user", "state", "created_at", "expires_at", "last_used_at"]
    list_filter = ["user"]
    search_fields = ["name", "prefix", "user__username"]
    fields = ["user", "name", "expires_at", "prefix", "revoked_at", "last_used_at", "created_at"]
    readonly_fields = ["prefix", "revoked_at", "last_used_at", "created_at"]
    raw_id_fields = ["user"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: APIToken | None = None):
        return [*self.readonly_fields, "user"] if obj is not None else self.readonly_fields

    def get_changeform_initial_data(self, request: HttpRequest) -> dict:
        return {"user": request.user.pk}

    def save_model(self, request: HttpRequest, obj: APIToken, form, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        row, secret = APIToken.issue(obj.user, name=obj.name)
        APIToken.objects.filter(pk=row.pk).update(expires_at=obj.expires_at)
        obj.pk, obj.prefix, obj.token_hash, obj.created_at = row.pk, row.prefix, row.token_hash, row.created_at
        obj._state.adding = False
        self.message_user(request, format_html(
            "API token for {}: <code>{}</code> — copy it now, it is not shown again. "
            "Use it as <code>Authorization: Bearer &lt;token&gt;</code>.", obj.user, secret), messages.WARNING)

    @admin.display(description="state")
    def state(self, obj: APIToken) -> str:
        return obj.state

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset) -> None:
        n = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{n} token(s) revoked")


@admin.register(Machine)
class MachineAdmin(ReadOnlyAdmin):
    list_display = ["hostname", "short_guid", "boot_id", "pid_namespace", "os_platform", "cpu_count", "last_seen"]
    list_filter = ["hostname", "os_platform"]
    search_fields = ["guid", "hostname", "host_id", "boot_id"]

    @admin.display(description="guid")
    def short_guid(self, obj: Machine) -> str:
        return obj.guid[:12]


@admin.register(Binary)
class BinaryAdmin(ReadOnlyAdmin):
    list_display = ["name", "version", "abspath", "binprovider", "status", "machine"]
    list_filter = ["status", "binprovider", "machine"]
    search_fields = ["name", "abspath", "version"]


@admin.register(Process)
class ProcessAdmin(ReadOnlyAdmin):
    list_display = ["short_id", "process_type", "status", "pid", "exit_code", "cmd_summary", "parent_link",
                    "machine", "started_at", "duration", "tree_link"]
    list_filter = ["status", "process_type", "machine"]
    search_fields = ["id", "cmd", "pwd", "stdout_tail", "stderr_tail"]
    list_select_related = ["machine", "parent"]
    date_hierarchy = "created_at"

    def get_urls(self):
        # before the defaults: their `<path:object_id>/` would swallow `<id>/tree/`
        tree = path("<path:object_id>/tree/", self.admin_site.admin_view(self.tree_view),
                    name="waybox_process_tree")
        return [tree, *super().get_urls()]

    @admin.display(description="id")
    def short_id(self, obj: Process) -> str:
        return str(obj.id)[-12:]

    @admin.display(description="command")
    def cmd_summary(self, obj: Process) -> str:
        return _cmd_text(obj)[:CMD_SUMMARY_CHARS]

    @admin.display(description="parent")
    def parent_link(self, obj: Process) -> str:
        return _process_link(obj.parent) if obj.parent_id else "-"

    @admin.display(description="duration")
    def duration(self, obj: Process) -> str:
        return process_duration(obj)

    @admin.display(description="tree")
    def tree_link(self, obj: Process) -> str:
        return format_html('<a href="{}">tree</a>', reverse("admin:waybox_process_tree", args=[obj.pk]))

    def tree_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """One process with its ancestors (root first) above it and its descendants below."""
        obj = self.get_object(request, object_id)
        if obj is None:
            raise Http404(f"no process with id {object_id}")
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": obj,
            "title": f"Process tree of {obj}",
            "rows": tree_rows(obj),
        }
        return TemplateResponse(request, "admin/waybox/process/tree.html", context)


def tree_rows(obj: Process) -> list[dict]:
    """The rows of the tree page in display order, each with its indentation depth."""
    ancestors = obj.ancestors[::-1]
    rows = [_tree_row(p, depth, "ancestor") for depth, p in enumerate(ancestors)]
    rows.append(_tree_row(obj, len(ancestors), "current"))
    children_of: dict = {}
    for p in sorted(obj.get_descendants(), key=lambda p: p.created_at):
        children_of.setdefault(p.parent_id, []).append(p)

    def walk(node: Process, depth: int) -> None:
        for child in children_of.get(node.pk, []):
            rows.append(_tree_row(child, depth, "descendant"))
            walk(child, depth + 1)

    walk(obj, len(ancestors) + 1)
    return rows


def _tree_row(p: Process, depth: int, role: str) -> dict:
    return {"process": p, "depth": depth, "indent": depth * 1.5, "role": role, "cmd": _cmd_text(p),
            "duration": process_duration(p)}


def _cmd_text(p: Process) -> str:
    return " ".join(map(str, p.cmd)) if isinstance(p.cmd, list) else str(p.cmd)


def _process_link(p: Process) -> str:
    url = reverse("admin:waybox_process_change", args=[p.pk])
    return format_html('<a href="{}">{} {}</a>', url, p.process_type, p.pid if p.pid is not None else "")


def process_duration(p: Process) -> str:
    if not p.started_at:
        return "-"
    seconds = ((p.ended_at or timezone.now()) - p.started_at).total_seconds()
    return f"{seconds:.1f}s" if p.ended_at else f"{seconds:.1f}s (running)"
