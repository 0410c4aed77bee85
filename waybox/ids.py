"""Time-sortable ids: UUIDv7, so primary-key order is creation order on every database."""

import uuid

from uuid6 import uuid7


def new_id() -> uuid.UUID:
    return uuid.UUID(bytes=uuid7().bytes)
