from django.conf import settings
from django.db import models
from django.utils import timezone

from waybox.models.base import Row, queue_index


class Crawl(Row):
    """One request to archive: seed URLs, a depth, tags and config overrides."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        STARTED = "started"
        SEALED = "sealed"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    retry_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    urls = models.TextField(help_text="Seed URLs, one per line.")
    source = models.CharField(max_length=500, blank=True, help_text="Where the URLs came from.")
    max_depth = models.PositiveSmallIntegerField(default=0)
    tags_str = models.CharField(max_length=1000, blank=True)
    config = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="crawls"
    )
    lease_owner = models.ForeignKey(
        "waybox.Process", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The worker holding this object until retry_at.",
    )
    current_step = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [queue_index("crawl")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        first = self.urls.splitlines()[0] if self.urls else ""
        return f"Crawl {self.id} ({first})"

    @property
    def tag_names(self) -> list[str]:
        return [t for t in self.tags_str.split(",") if t]
