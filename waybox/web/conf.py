"""The web UI's part of the Django settings, and the collection config as the web sees it.

`web_settings()` is applied by `waybox.settings.build_settings`, so every waybox process
(CLI, workers, the server) has the same settings; only the server serves them.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from waybox.config import Config, load_config
from waybox.datadir import DataDir

WEB_DIR = Path(__file__).resolve().parent
CONFIG_RECHECK_S = 2.0
MAX_FORM_BYTES = 32 * 1024 * 1024  # a pasted list of URLs, a JSON body of the API


def web_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Add the web UI, the API, static files and the security settings to `settings`."""
    apps = list(settings["INSTALLED_APPS"])
    if "ninja" not in apps:
        apps.append("ninja")  # the API docs' JavaScript from the package, not a CDN
    middleware = list(settings["MIDDLEWARE"])
    security = middleware.index("django.middleware.security.SecurityMiddleware")
    middleware.insert(security + 1, "waybox.web.middleware.StaticFilesMiddleware")
    auth = middleware.index("django.contrib.auth.middleware.AuthenticationMiddleware")
    middleware.insert(auth + 1, "waybox.web.middleware.WebSecurityMiddleware")
    templates = [dict(t) for t in settings["TEMPLATES"]]
    templates[0]["DIRS"] = [*templates[0].get("DIRS", []), str(WEB_DIR / "templates")]
    templates[0]["OPTIONS"] = {
        **templates[0]["OPTIONS"],
        "context_processors": [
            *templates[0]["OPTIONS"]["context_processors"],
            "waybox.web.context.web_context",
        ],
    }
    return {
        **settings,
        "INSTALLED_APPS": apps,
        "MIDDLEWARE": middleware,
        "TEMPLATES": templates,
        "STATICFILES_DIRS": [str(WEB_DIR / "static")],
        "LOGIN_URL": "/login/",
        "LOGIN_REDIRECT_URL": "/",
        "LOGOUT_REDIRECT_URL": "/login/",
        "SESSION_COOKIE_NAME": "waybox_session",
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "CSRF_COOKIE_NAME": "waybox_csrftoken",
        "CSRF_COOKIE_HTTPONLY": True,
        "CSRF_COOKIE_SAMESITE": "Lax",
        "X_FRAME_OPTIONS": "DENY",
        "SECURE_CONTENT_TYPE_NOSNIFF": True,
        "SECURE_REFERRER_POLICY": "same-origin",
        "DATA_UPLOAD_MAX_MEMORY_SIZE": MAX_FORM_BYTES,
        "WHITENOISE_AUTOREFRESH": False,
        "WHITENOISE_USE_FINDERS": True,  # no collectstatic step: the files are served from the packages
        "NINJA_PAGINATION_MAX_LIMIT": 500,
    }


class _ConfigCache:
    """The collection's config, re-read when waybox.toml changes (checked every few seconds)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.config: Config | None = None
        self.stamp: object = None
        self.checked = 0.0

    def get(self) -> Config:
        now = time.monotonic()
        if self.config is not None and now - self.checked < CONFIG_RECHECK_S:
            return self.config
        with self.lock:
            datadir = data_dir()
            try:
                stat = datadir.config_file.stat()
                stamp: object = (stat.st_mtime_ns, stat.st_size)
            except OSError:
                stamp = None
            if self.config is None or stamp != self.stamp:
                self.config = load_config(datadir)
                self.stamp = stamp
            self.checked = now
            return self.config


_cache = _ConfigCache()


def data_dir() -> DataDir:
    from django.conf import settings

    return DataDir(Path(settings.WAYBOX_DATA_DIR))


def get_config() -> Config:
    return _cache.get()


def flag(key: str) -> bool:
    return bool(get_config().get(key, False))


def archive_origin() -> str:
    """The separate origin archived content is served from ('' = the UI's own origin)."""
    return str(get_config().get("ARCHIVE_ORIGIN", "") or "").strip().rstrip("/")
