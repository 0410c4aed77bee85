"""waybox: a self-hosted web archiver."""

__version__ = "0.1.0"
