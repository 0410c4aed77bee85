"""Where a collection lives on disk, and what is inside it.

One place names every path of the data directory layout (BRIEF.md section 2), so that
no other module builds these paths by hand.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

CONFIG_FILENAME = "waybox.toml"
DB_FILENAME = "index.sqlite3"
SECRET_FILENAME = ".secret_key"
DATA_DIR_ENV = "WAYBOX_DATA_DIR"


@dataclass(frozen=True)
class DataDir:
    root: Path

    @property
    def config_file(self) -> Path:
        return self.root / CONFIG_FILENAME

    @property
    def db_file(self) -> Path:
        return self.root / DB_FILENAME

    @property
    def archive(self) -> Path:
        return self.root / "archive"

    @property
    def crawls(self) -> Path:
        return self.root / "crawls"

    @property
    def plugins(self) -> Path:
        return self.root / "plugins"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        """Sockets, lock files and process output of the running system."""
        return self.root / "logs" / "run"

    def snapshot_dir(self, snapshot_id: object) -> Path:
        return self.archive / str(snapshot_id)

    def crawl_dir(self, crawl_id: object) -> Path:
        return self.crawls / str(crawl_id)

    def is_collection(self) -> bool:
        return self.config_file.exists() or self.db_file.exists()

    def secret_key(self) -> str:
        """A per-collection Django secret, created on first use and kept private to its owner."""
        path = self.root / SECRET_FILENAME
        if not path.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{SECRET_FILENAME}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(48))
            try:  # link, not rename: when two first commands race, the first key stays
                os.link(tmp, path)
            except FileExistsError:
                pass
            except OSError:  # a filesystem without hard links
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
        return path.read_text().strip()

    def create_layout(self) -> None:
        for folder in (self.archive, self.crawls, self.plugins, self.logs, self.run):
            folder.mkdir(parents=True, exist_ok=True)


def resolve_data_dir(option: str | os.PathLike[str] | None = None) -> DataDir:
    """--data-dir beats WAYBOX_DATA_DIR beats the current working directory."""
    raw = option or os.environ.get(DATA_DIR_ENV)
    if not raw:
        try:
            raw = os.getcwd()
        except FileNotFoundError:
            raise ValueError("the current folder no longer exists: cd to your collection or pass --data-dir") from None
    return DataDir(Path(raw).expanduser().resolve())
