#!/usr/bin/env bash
# Benchmark hook: records its own start and end with nanosecond timestamps, does nothing else.
start=$(date +%s.%N)
echo "$(basename "$0") ${SNAP_DIR##*/} $start $(date +%s.%N)" >> "$DATA_DIR/bench-times.txt"
