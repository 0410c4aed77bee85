"""The Django admin: every model, and for Process a tree view of one process's family.

Process, Machine and Binary rows are records of what happened on a machine, so they are
read-only here: editing a pid or an exit code would only make the record lie.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from waybox.models import ArchiveResult, Binary, Crawl, Machine, Process, Snapshot, Tag

CMD_SUMMARY_CHARS = 80


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
    list_display = ["url", "title", "status", "current_step", "depth", "crawl", "created_at"]
    list_filter = ["status", "current_step", "depth", "tags"]
    search_fields = ["id", "url", "title"]
    raw_id_fields = ["crawl", "parent", "lease_owner"]
    filter_horizontal = ["tags"]
    date_hierarchy = "created_at"
    inlines = [ArchiveResultInline]


@admin.register(ArchiveResult)
class ArchiveResultAdmin(admin.ModelAdmin):
    list_display = ["hook_name", "plugin", "status", "attempts", "snapshot", "process_link", "started_at", "ended_at"]
    list_filter = ["status", "plugin"]
    search_fields = ["hook_name", "plugin", "output_str", "snapshot__url"]
    raw_id_fields = ["snapshot", "crawl", "process", "lease_owner"]

    @admin.display(description="process")
    def process_link(self, obj: ArchiveResult) -> str:
        return _process_link(obj.process) if obj.process_id else "-"


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


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
