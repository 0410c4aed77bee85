#!/usr/bin/env bash
# Installs the npm packages of waybox's plugins: every waybox/plugins/*/package.json (and those of
# extra plugin folders given as arguments) gets its node_modules/ next to it. Needs node and npm.
# Idempotent; uses package-lock.json (npm ci) when the plugin ships one.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v npm >/dev/null || { echo "install-plugin-deps.sh: npm is not installed (apt-get install npm)" >&2; exit 1; }
dirs=(waybox/plugins "$@")
status=0
for root in "${dirs[@]}"; do
  for pkg in "$root"/*/package.json; do
    [ -f "$pkg" ] || continue
    dir=$(dirname "$pkg")
    if [ -f "$dir/package-lock.json" ]; then
      cmd=(npm ci --omit=dev --no-audit --no-fund --loglevel=error)
    else
      cmd=(npm install --omit=dev --no-audit --no-fund --loglevel=error)
    fi
    echo "install-plugin-deps.sh: ${cmd[*]} in $dir" >&2
    if ! (cd "$dir" && "${cmd[@]}" >/dev/null); then
      echo "install-plugin-deps.sh: npm failed in $dir" >&2
      status=1
    fi
  done
done
exit $status
