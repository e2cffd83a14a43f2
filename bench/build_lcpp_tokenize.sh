#!/usr/bin/env bash
# Builds build/lcpp_tokenize (bench/lcpp_tokenize.cpp) against the prebuilt llama.cpp libraries and headers
# of the llama.cpp oracle (../shared/tools/llamacpp-oracle; run its install.sh first). Prints the binary path.
set -euo pipefail
cd "$(dirname "$0")/.."
O=${ORACLE_DIR:-$(cd ../shared/tools/llamacpp-oracle && pwd)}
H=$O/.build/llama-headers
B=$O/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
[ -d "$H/include" ] || { echo "missing $H: run the oracle's install.sh (it extracts the headers)" >&2; exit 1; }
lib() { (cd "$B" && ls | grep -E "$1" | head -1); }
mkdir -p build
out=build/lcpp_tokenize
if [ ! -x "$out" ] || [ bench/lcpp_tokenize.cpp -nt "$out" ]; then
  ${CXX:-g++} -O2 -std=c++17 -w -I "$H/include" -I "$H/ggml/include" bench/lcpp_tokenize.cpp -o "$out" -L "$B" \
    "-l:$(lib '^libllama\..*\.so$|^libllama\.so$')" "-l:$(lib '^libggml\.v.*\.so$|^libggml\.so$')" \
    "-l:$(lib '^libggml-base\.so$')" "-Wl,-rpath,$B" -pthread
fi
echo "$PWD/$out"
