from django.db import models
from django.db.models import Q
from django.utils import timezone

from waybox.models.base import Row, queue_index


class ArchiveResult(Row):
    """One hook on one Snapshot (or, for Crawl hooks, on one Crawl), across its attempts."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        STARTED = "started"
        BACKOFF = "backoff"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        SKIPPED = "skipped"

    FINAL_STATES = (Status.SUCCEEDED, Status.FAILED, Status.SKIPPED)

    snapshot = models.ForeignKey(
        "waybox.Snapshot", null=True, blank=True, on_delete=models.CASCADE, related_name="results"
    )
    crawl = models.ForeignKey(
        "waybox.Crawl", null=True, blank=True, on_delete=models.CASCADE, related_name="crawl_results",
        help_text="Set for on_Crawl / on_CrawlEnd hooks, which have no Snapshot.",
    )
    plugin = models.CharField(max_length=64, db_index=True)
    hook_name = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    retry_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    attempts = models.PositiveSmallIntegerField(default=0)
    process = models.ForeignKey(
        "waybox.Process", null=True, blank=True, on_delete=models.SET_NULL, related_name="archiveresults"
    )
    lease_owner = models.ForeignKey(
        "waybox.Process", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The worker holding this object until retry_at.",
    )
    output_str = models.TextField(blank=True)
    output_json = models.JSONField(null=True, blank=True)
    output_files = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [queue_index("archiveresult")]
        constraints = [
            models.UniqueConstraint(
                fields=["snapshot", "plugin", "hook_name"], condition=Q(snapshot__isnull=False),
                name="result_once_per_hook"
            ),
            models.UniqueConstraint(
                fields=["crawl", "plugin", "hook_name"], condition=Q(snapshot__isnull=True),
                name="crawl_result_once_per_hook"
            ),
        ]
        ordering = ["hook_name"]

    def __str__(self) -> str:
        return f"{self.hook_name} [{self.status}]"

    @property
    def step(self) -> int:
        from waybox.plugin_registry import HOOK_RE

        m = HOOK_RE.match(self.hook_name)
        return int(m["num"][0]) if m and m["num"] else 9

    @property
    def is_background(self) -> bool:
        return ".bg." in self.hook_name
