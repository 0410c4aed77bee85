#!/usr/bin/env bash
# Installs everything waybox needs on Debian 12 (run as root): system packages, a virtualenv
# in .venv with waybox, and `waybox` on PATH. `--dev` adds the test tools and PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=0
[ "${1:-}" = "--dev" ] && DEV=1

need=()
command -v wget >/dev/null || need+=(wget)
command -v git >/dev/null || need+=(git)
command -v curl >/dev/null || need+=(curl)
command -v chromium >/dev/null || need+=(chromium)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [ "$DEV" = 1 ]; then
  [ -x /usr/lib/postgresql/15/bin/postgres ] || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "install.sh: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check --upgrade pip >/dev/null
if [ "$DEV" = 1 ]; then
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
else
  .venv/bin/pip install -q --disable-pip-version-check -e .
fi
# Byte-compile waybox itself (an editable install is not compiled by pip): every command and
# worker then starts without compiling ~100 modules, also where PYTHONDONTWRITEBYTECODE is set.
.venv/bin/python -m compileall -q waybox >/dev/null
# npm packages of plugins (single-file-cli, @mozilla/readability) from their lock files;
# playwright drives the system chromium and never downloads a browser.
bash scripts/install-plugin-deps.sh
if [ "$(id -u)" = 0 ] && [ -d /usr/local/bin ]; then
  ln -sf "$PWD/.venv/bin/waybox" /usr/local/bin/waybox
fi
echo "install.sh: waybox $(.venv/bin/waybox --version | cut -d' ' -f2) installed in $PWD/.venv" >&2
