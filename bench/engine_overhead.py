#!/usr/bin/env python3
"""N Snapshots x 10 no-op hooks (one per step) through waybox, against a shell baseline that
runs the same hook processes with the same step barriers at the same parallelism.

    .venv/bin/python bench/engine_overhead.py [--snapshots 200] [--parallel 4] [--actors N]

Prints both wall times and their ratio (target: at most 1.2).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import uuid

from common import NOOP_PLUGINS, cleanup, machine, noop_collection, queue_snapshots, timed, waybox

HOOKS = sorted((NOOP_PLUGINS / "noop").glob("on_Snapshot__*.sh"))

BASELINE = r"""
snapshot() {  # one Snapshot: its 10 steps in order, each step a barrier (one hook per step)
  export SNAP_DIR="$ROOT/archive/$1"; mkdir -p "$SNAP_DIR/noop"; cd "$SNAP_DIR/noop"
  for hook in $HOOKS; do bash "$hook" --url="http://127.0.0.1:9/bench/$1" --snapshot-id="$1" >/dev/null; done
}
export -f snapshot
printf '%s\n' $IDS | xargs -P "$PARALLEL" -I{} bash -c 'snapshot {}'
"""


def baseline(root, count: int, parallel: int) -> float:
    ids = " ".join(str(uuid.uuid4()) for _ in range(count))
    env = {**os.environ, "ROOT": str(root), "DATA_DIR": str(root), "HOOKS": " ".join(map(str, HOOKS)),
           "IDS": ids, "PARALLEL": str(parallel)}
    return timed(lambda: subprocess.run(["bash", "-c", BASELINE], env=env, check=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--actors", type=int, default=0, help="MAX_CONCURRENT_ACTORS (default: waybox's default)")
    args = parser.parse_args()
    root = noop_collection(args.parallel)
    if args.actors:
        waybox(root, "config", "--set", f"MAX_CONCURRENT_ACTORS={args.actors}")
    actors = waybox(root, "config", "--get", "MAX_CONCURRENT_ACTORS").stdout.strip()
    try:
        queue_snapshots(root, args.snapshots)
        engine = timed(lambda: waybox(root, "run"))
        shell = baseline(root, args.snapshots, args.parallel)
    finally:
        cleanup(root)
    hooks = args.snapshots * len(HOOKS)
    print(f"engine_overhead: {args.snapshots} snapshots x {len(HOOKS)} hooks, parallelism {args.parallel}, "
          f"{actors} actor(s) per type, {machine()}")
    print(f"  waybox run:     {engine:8.2f} s  ({engine / hooks * 1000:.1f} ms per hook)")
    print(f"  shell baseline: {shell:8.2f} s  ({shell / hooks * 1000:.1f} ms per hook)")
    print(f"  ratio:          {engine / shell:8.2f}  (target <= 1.2)")


if __name__ == "__main__":
    main()
