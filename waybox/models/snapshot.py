from django.db import models
from django.utils import timezone

from waybox.models.base import Row, queue_index


class Snapshot(Row):
    """One capture of one URL at one time; a URL may have many Snapshots over time."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        STARTED = "started"
        SEALED = "sealed"

    url = models.CharField(max_length=4096, db_index=True)
    crawl = models.ForeignKey("waybox.Crawl", on_delete=models.CASCADE, related_name="snapshots")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="discovered",
        help_text="The Snapshot this URL was discovered in.",
    )
    depth = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    retry_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    current_step = models.PositiveSmallIntegerField(default=0)
    title = models.CharField(max_length=1000, blank=True)
    config = models.JSONField(default=dict, blank=True)
    tags = models.ManyToManyField("waybox.Tag", blank=True, related_name="snapshots")
    lease_owner = models.ForeignKey(
        "waybox.Process", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The worker holding this object until retry_at.",
    )
    bookmarked_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    output_size = models.BigIntegerField(default=0, help_text="Bytes in the Snapshot folder when last indexed.")

    class Meta:
        indexes = [queue_index("snapshot")]
        constraints = [models.UniqueConstraint(fields=["crawl", "url"], name="snapshot_once_per_crawl")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Snapshot {self.id} {self.url}"
