from django.db import models
from django.utils import timezone

from waybox.ids import new_id


class Row(models.Model):
    """Every waybox row: a time-sortable UUID and when it was created and last changed."""

    id = models.UUIDField(primary_key=True, default=new_id, editable=False)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    modified_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def queue_index(model_name: str) -> models.Index:
    """status + retry_at together are the queue every actor reads."""
    return models.Index(fields=["status", "retry_at"], name=f"{model_name}_queue_idx")
