"""The data model. One module per object; this package re-exports them for Django."""

from waybox.models.apitoken import APIToken
from waybox.models.archiveresult import ArchiveResult
from waybox.models.crawl import Crawl
from waybox.models.machine import Binary, Machine
from waybox.models.process import Process
from waybox.models.snapshot import Snapshot
from waybox.models.tag import Tag

__all__ = ["APIToken", "ArchiveResult", "Binary", "Crawl", "Machine", "Process", "Snapshot", "Tag"]
