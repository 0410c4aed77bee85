"""Django, configured by waybox itself: users never write a settings file.

`setup_django()` is the only entry to Django; every command calls it once with the data
directory it works on.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from waybox.datadir import DataDir

SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=60000",
)
SQLITE_TIMEOUT_S = 60


def database_settings(datadir: DataDir, database_url: str = "") -> dict[str, Any]:
    """SQLite in the data directory, or PostgreSQL when DATABASE_URL says so."""
    if not database_url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(datadir.db_file),
            "OPTIONS": {
                "timeout": SQLITE_TIMEOUT_S,
                "transaction_mode": "IMMEDIATE",
                "init_command": ";".join(SQLITE_PRAGMAS),
            },
        }
    url = urlsplit(database_url)
    if url.scheme not in ("postgres", "postgresql"):
        raise ValueError(f"DATABASE_URL: unsupported scheme {url.scheme!r} (use postgres://)")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(url.path.lstrip("/")),
        "USER": unquote(url.username or ""),
        "PASSWORD": unquote(url.password or ""),
        "HOST": url.hostname or "",
        "PORT": str(url.port or ""),
        "CONN_MAX_AGE": 0,
    }


CORE_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "waybox.apps.WayboxConfig"]


def build_settings(datadir: DataDir, database_url: str = "", *, web: bool = True) -> dict[str, Any]:
    """Every setting. `web=False` leaves out what only the server needs (admin, sessions,
    messages, static files, the API): a command starts ~0.1 s sooner and uses less memory, and
    the models and database are the same."""
    settings = _base_settings(datadir, database_url)
    if not web:
        return {**settings, "INSTALLED_APPS": CORE_APPS}
    from waybox.web.conf import web_settings

    return web_settings(settings)


def _base_settings(datadir: DataDir, database_url: str) -> dict[str, Any]:
    return {
        "DEBUG": False,
        "SECRET_KEY": datadir.secret_key() if datadir.root.exists() else "not-initialised",
        "ALLOWED_HOSTS": ["*"],
        "INSTALLED_APPS": [
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "django.contrib.staticfiles",
            "waybox.apps.WayboxConfig",
        ],
        "MIDDLEWARE": [
            "django.middleware.security.SecurityMiddleware",
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
            "django.middleware.clickjacking.XFrameOptionsMiddleware",
        ],
        "ROOT_URLCONF": "waybox.urls",
        "TEMPLATES": [
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "DIRS": [],
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        "DATABASES": {"default": database_settings(datadir, database_url)},
        "DEFAULT_AUTO_FIELD": "django.db.models.BigAutoField",
        "USE_TZ": True,
        "TIME_ZONE": "UTC",
        "STATIC_URL": "/static/",
        "STATIC_ROOT": str(datadir.root / "logs" / "static"),
        "WAYBOX_DATA_DIR": str(datadir.root),
        "LOGGING": {"version": 1, "disable_existing_loggers": False},
    }


def setup_django(datadir: DataDir, database_url: str = "", *, web: bool = True) -> None:
    import django
    from django.conf import settings

    if settings.configured:
        return
    settings.configure(**build_settings(datadir, database_url, web=web))
    django.setup()
