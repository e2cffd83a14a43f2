#!/usr/bin/env bash
# Decode (or prefill) tokens/s of two llminfer binaries (say main's and a branch's) on the same
# files, the two alternating run by run, so that a change in the machine's load hits both. One line
# per file and thread count: each binary's figure of every round (bench/RESULTS.md).
#   bench/ab.sh [-t "1 2"] [-r ROUNDS] [-n TOKENS] [-d DEPTH] [--parallel P] [--prefill N] BINARY_A BINARY_B MODEL.gguf...
# Each run: `llminfer bench -m MODEL -t T -p 8 -n TOKENS -r 2 --json` (with --parallel P: P
# sessions at once, their aggregate), decode_tps of its JSON; with --prefill N, `-p N -n 0` and its
# prefill_tps (a prompt of N tokens from an empty cache). -d DEPTH: the runs start with DEPTH tokens
# in the cache (`llminfer bench -d`; both binaries must have it).
set -euo pipefail
TS="1 2" R=3 N=64 P="" PF="" D=0
args=()
while [ $# -gt 0 ]; do
  case $1 in
    -t) TS=$2; shift 2 ;;
    -r) R=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    -d) D=$2; shift 2 ;;
    --parallel) P=$2; shift 2 ;;
    --prefill) PF=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ ${#args[@]} -lt 3 ]; then
  echo "usage: bench/ab.sh [-t \"1 2\"] [-r ROUNDS] [-n TOKENS] [-d DEPTH] [--parallel P] [--prefill N] BINARY_A BINARY_B MODEL.gguf..." >&2
  exit 2
fi
A=${args[0]} B=${args[1]}
for bin in "$A" "$B"; do
  [ -x "$bin" ] || { echo "bench/ab.sh: $bin is not an executable" >&2; exit 2; }
done
tps() {  # binary model threads
  local extra=(-p 8 -n "$N") key=decode_tps
  [ -n "$P" ] && extra+=(--parallel "$P")
  [ -n "$PF" ] && extra=(-p "$PF" -n 0) key=prefill_tps
  [ "$D" != 0 ] && extra+=(-d "$D")
  local out
  out=$("$1" bench -m "$2" -t "$3" -r 2 "${extra[@]}" --json 2>/dev/null | tail -1) || true
  local v
  v=$(printf '%s' "$out" | grep -o "\"$key\":[0-9.]*" | cut -d: -f2) || true
  printf '%s' "${v:-failed}"
}
for model in "${args[@]:2}"; do
  [ -f "$model" ] || { echo "bench/ab.sh: no file $model" >&2; exit 2; }
  for t in $TS; do
    ra=() rb=()
    for ((i = 0; i < R; i++)); do
      ra+=("$(tps "$A" "$model" "$t")")
      rb+=("$(tps "$B" "$model" "$t")")
    done
    echo "$(basename "$model" .gguf) threads=$t${P:+ parallel=$P}${PF:+ prefill=$PF}$([ "$D" != 0 ] && echo " depth=$D")  A: ${ra[*]}  B: ${rb[*]}"
  done
done
