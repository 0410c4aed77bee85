"""The WSGI application: `gunicorn waybox.web.wsgi:application` with WAYBOX_DATA_DIR set.

`waybox server` runs exactly that (see waybox/cli/server_cmd.py); any other WSGI server can
too.
"""

from waybox.config import load_config
from waybox.datadir import resolve_data_dir
from waybox.settings import setup_django

_datadir = resolve_data_dir()
setup_django(_datadir, load_config(_datadir)["DATABASE_URL"])

from django.core.wsgi import get_wsgi_application  # noqa: E402 - Django must be set up first

application = get_wsgi_application()
