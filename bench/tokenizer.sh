#!/usr/bin/env bash
# Tokenizer speed: llminfer next to llama.cpp (the llama.cpp oracle's prebuilt library) on the same
# ~1 MB text, for each vocabulary of ../shared/models. Both load the vocabulary first and then time only
# the tokenization of the whole text (best of --reps runs; add_special on, parse_special off, as
# `llminfer tokenize` and llama.cpp's llama_tokenize default). One process at a time, so run it on an
# idle machine; the numbers are side by side in the same run.
#   bench/tokenizer.sh [--reps N] [--text FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=5
text=""
while [ $# -gt 0 ]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    *) echo "usage: bench/tokenizer.sh [--reps N] [--text FILE]" >&2; exit 1 ;;
  esac
done
make -s llminfer.hpp
mkdir -p build
${CXX:-g++} -std=c++20 -O2 -march=native -pthread bench/tokenizer_bench.cpp -o build/tokenizer_bench
lcpp=$(bench/build_lcpp_tokenize.sh)
export LCPP_BINS=$(cd ../shared/tools/llamacpp-oracle && pwd)/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if [ -z "$text" ]; then  # ~1 MB of the test corpus (many scripts, code, digits, emoji), repeated
  text=build/tokenizer-bench.txt
  python3 - "$text" <<'PY'
import json, sys
parts = [json.loads(l)["text"] for l in open("tests/tokenizer/corpus.jsonl", encoding="utf-8")]
blob = "\n".join(parts)
out = (blob * (1_000_000 // len(blob.encode()) + 1)).encode()[:1_000_000]
while True:  # cut at a character boundary
    try:
        out.decode(); break
    except UnicodeDecodeError:
        out = out[:-1]
open(sys.argv[1], "wb").write(out)
PY
fi
M=../shared/models
printf '%-34s %12s %12s %10s %10s\n' model "llminfer MB/s" "llama.cpp MB/s" "tokens" "lcpp tok"
for m in synth-qwen3-tiny-q8_0.gguf synth-llama-tiny-q8_0.gguf synth-gemma3-tiny-q8_0.gguf \
         synth-smollm2-tiny-q8_0.gguf stories260K.gguf; do
  a=$(build/tokenizer_bench "$M/$m" "$text" --reps "$reps")
  b=$("$lcpp" bench "$M/$m" "$text" --reps "$reps")
  python3 - "$m" "$a" "$b" <<'PY'
import json, sys
a, b = json.loads(sys.argv[2]), json.loads(sys.argv[3])
print("%-34s %12.2f %12.2f %10d %10d" % (sys.argv[1], a["mb_per_s"], b["mb_per_s"], a["tokens"], b["tokens"]))
PY
done
