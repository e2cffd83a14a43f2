#!/usr/bin/env bash
# Aggregate decode tokens/s of P sessions decoding at once (P = 1, 2, 4, 8 or -P's), llminfer's batched
# decoding side by side with llama.cpp's parallel decoding (bench/lcpp_parallel.cpp: P sequences in
# one llama_decode per step, as `llama-server -np P`), on the same files and thread count, repeated
# and interleaved (llminfer P=1..8, llama.cpp P=1..8, again), so that a change in the machine's load
# hits both. Prints a markdown table of medians (bench/RESULTS.md).
#   bench/batch.sh [-t THREADS] [-n TOKENS] [-r ROUNDS] [-P "1 2 4 8"] [-d DEPTH] [-p PROMPT] [--no-lcpp] MODEL.gguf...
# -d DEPTH: every session decodes after DEPTH tokens in its cache (`llminfer bench -d`), so -P 1 -d
# 2048 is the decode of one conversation at 2048 tokens of context beside llama.cpp's.
# -p PROMPT: one session's prompt of PROMPT tokens after DEPTH instead (llama-bench's pp<PROMPT> at
# --n-depth DEPTH: a conversation's next message), prompt tokens/s side by side.
# The llama.cpp side needs the oracle (../shared/tools/llamacpp-oracle, LLMINFER_LCPP_ORACLE=DIR):
# its headers and shared libraries; built here into build/lcpp_parallel.
set -euo pipefail
cd "$(dirname "$0")/.."
T=2 N=32 R=3 D=0 PP=0 LCPP=1 PS=(1 2 4 8)
models=()
while [ $# -gt 0 ]; do
  case $1 in
    -t) T=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    -r) R=$2; shift 2 ;;
    -d) D=$2; shift 2 ;;
    -P) read -ra PS <<<"$2"; shift 2 ;;
    -p) PP=$2; shift 2 ;;
    --no-lcpp) LCPP=0; shift ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || { echo "usage: bench/batch.sh [-t T] [-n N] [-r R] [-P LIST] [-d D] [-p PROMPT] [--no-lcpp] MODEL.gguf..."; exit 1; }
if [ "$PP" -gt 0 ]; then PS=(1); fi
make -s build/llminfer
ORACLE=${LLMINFER_LCPP_ORACLE:-../shared/tools/llamacpp-oracle}
BINS=$(ls -d "$ORACLE"/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64 2>/dev/null || true)
HDR=$ORACLE/.build/llama-headers
if [ $LCPP = 1 ]; then
  if [ -z "$BINS" ] || [ ! -d "$HDR/include" ]; then
    echo "no llama.cpp oracle at $ORACLE (its headers are extracted by its first native run): --no-lcpp"; LCPP=0
  else
    libs=()
    for re in '^libllama\.v.*\.so$' '^libggml\.v.*\.so$' '^libggml-base\.so$'; do
      libs+=("-l:$(ls "$BINS" | grep -E "$re" | head -1)")
    done
    g++ -O2 -std=c++17 -w -I "$HDR/include" -I "$HDR/ggml/include" bench/lcpp_parallel.cpp -o build/lcpp_parallel \
      -L "$BINS" "${libs[@]}" "-Wl,-rpath,$BINS" -pthread
  fi
fi
out=$(mktemp)
for m in "${models[@]}"; do
  for round in $(seq "$R"); do
    for p in "${PS[@]}"; do
      if [ "$PP" -gt 0 ]; then
        v=$(build/llminfer bench -m "$m" -t "$T" -p "$PP" -n 0 -r 1 -d "$D" --json |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["prefill_tps"])')
      else
        v=$(build/llminfer bench -m "$m" -t "$T" -p 8 -n "$N" -r 1 -d "$D" --parallel "$p" --json |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["decode_tps"])')
      fi
      echo "$m llminfer $p $v" >>"$out"
      echo "  $(basename "$m") round $round: llminfer P=$p $v tokens/s" >&2
    done
    if [ $LCPP = 1 ]; then
      for p in "${PS[@]}"; do
        if [ "$PP" -gt 0 ]; then args=(1 "$PP" 1 "$D" prompt); else args=("$p" "$N" 1 "$D"); fi
        v=$(build/lcpp_parallel "$BINS" "$m" "$T" "${args[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_tps"])')
        echo "$m llama.cpp $p $v" >>"$out"
        echo "  $(basename "$m") round $round: llama.cpp P=$p $v tokens/s" >&2
      done
    fi
  done
done
python3 - "$out" "$T" "$N" "$R" "$D" "${PS[*]}" "$PP" <<'PY'
import sys, statistics, os
rows = [l.split() for l in open(sys.argv[1])]
T, N, R, D = sys.argv[2:6]
PS = [int(p) for p in sys.argv[6].split()]
PP = int(sys.argv[7])
models = list(dict.fromkeys(r[0] for r in rows))
def med(m, e, p):
    v = [float(r[3]) for r in rows if r[0] == m and r[1] == e and r[2] == str(p)]
    return statistics.median(v) if v else None
if PP:
    print(f"threads {T}, a prompt of {PP} tokens after {D} in the cache, prompt tokens/s, median of {R} interleaved rounds")
    print()
    print("| model | llminfer tokens/s | llama.cpp tokens/s | llminfer / llama.cpp |")
    print("| --- | ---: | ---: | ---: |")
    for m in models:
        a, b = med(m, "llminfer", 1), med(m, "llama.cpp", 1)
        fa, fb = f"{a:.2f}" if a else "-", f"{b:.2f}" if b else "-"
        print(f"| {os.path.basename(m)} | {fa} | {fb} | {f'{a / b:.2f}x' if a and b else '-'} |")
    sys.exit(0)
print(f"threads {T}, {N} tokens per session after {D} in its cache, median of {R} interleaved rounds")
print()
print("| model | P | llminfer tokens/s | vs P=1 | llama.cpp tokens/s | vs P=1 | llminfer / llama.cpp |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for m in models:
    a1, b1 = med(m, "llminfer", 1), med(m, "llama.cpp", 1)
    for p in PS:
        a, b = med(m, "llminfer", p), med(m, "llama.cpp", p)
        fa = f"{a:.2f} | {a / a1:.2f}x" if a and a1 else f"{a:.2f} | -" if a else "- | -"
        fb = f"{b:.2f} | {b / b1:.2f}x" if b and b1 else f"{b:.2f} | -" if b else "- | -"
        r = f"{a / b:.2f}x" if a and b else "-"
        print(f"| {os.path.basename(m)} | {p} | {fa} | {fb} | {r} |")
PY
rm -f "$out"
