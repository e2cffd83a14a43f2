#!/usr/bin/env bash
# make cmake-check: llminfer's CMake package and pkg-config files, used the ways a project would.
#   tests/cmake/run.sh [OUT]     (OUT: build/cmake-check; removed and rebuilt)
# Two lanes run at once (each compiles the implementation once):
#   A: llminfer configured with LLMINFER_BUILD_LIBRARY=ON, built, `cmake --install` into OUT/prefix;
#      then the consumer with find_package(llminfer CONFIG) (links the installed llminfer::impl),
#      and a plain compiler command with `pkg-config --cflags --libs llminfer-impl`.
#   B: the consumer with add_subdirectory (builds llminfer::impl itself), then with FetchContent
#      from a source archive of this checkout (header only: its own impl.cpp).
# Each consumer (tests/cmake/consumer/main.cpp) writes a tiny model, loads it, tokenizes and
# generates, and fails unless the results are the ones the model was built to give.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$PWD
out=${1:-build/cmake-check}
mkdir -p "$out" && out=$(cd "$out" && pwd)
rm -rf "${out:?}"/*
gen=()
if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
# -O0: these builds check how llminfer is found and linked, not its speed (the implementation
# compiles in two thirds of -O1's time, and the consumer's tiny model runs as well).
common=("${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O0 -Wno-dev)
consumer=tests/cmake/consumer

lane_a() {
  set -e
  echo "-- llminfer with LLMINFER_BUILD_LIBRARY=ON, installed into $out/prefix"
  cmake -S . -B "$out/lib" "${common[@]}" -DLLMINFER_BUILD_LIBRARY=ON -DLLMINFER_BUILD_EXAMPLES=OFF \
    -DLLMINFER_INSTALL=ON -DCMAKE_INSTALL_PREFIX="$out/prefix"
  cmake --build "$out/lib"
  cmake --install "$out/lib"
  (cd "$out/prefix" && find . -type f | sort)
  echo "-- find_package(llminfer CONFIG)"
  cmake -S $consumer -B "$out/package" "${common[@]}" -DHOW=package -DCMAKE_PREFIX_PATH="$out/prefix"
  cmake --build "$out/package"
  "$out/package/consumer" "$out/package"
  echo "-- pkg-config"
  local pc
  pc=$(find "$out/prefix" -name llminfer.pc)
  export PKG_CONFIG_PATH
  PKG_CONFIG_PATH=$(dirname "$pc")
  echo "pkg-config --cflags llminfer: $(pkg-config --cflags llminfer)"
  echo "pkg-config --libs llminfer-impl: $(pkg-config --libs llminfer-impl)"
  pkg-config --cflags llminfer | grep -q -- '-std=c++20' || { echo "llminfer.pc: no -std=c++20"; return 1; }
  [ "$(pkg-config --modversion llminfer)" = "$(sed -n 's/^#define LLMINFER_VERSION_STRING "\(.*\)"/\1/p' llminfer.hpp)" ]
  mkdir -p "$out/pkgconfig"
  # shellcheck disable=SC2046  # (word splitting wanted)
  c++ -O0 $(pkg-config --cflags llminfer-impl) $consumer/main.cpp -o "$out/pkgconfig/consumer" \
    $(pkg-config --libs llminfer-impl)
  "$out/pkgconfig/consumer" "$out/pkgconfig"
}

lane_b() {
  set -e
  echo "-- add_subdirectory"
  cmake -S $consumer -B "$out/subdirectory" "${common[@]}" -DHOW=subdirectory -DLLMINFER_SOURCE="$src"
  cmake --build "$out/subdirectory"
  "$out/subdirectory/consumer" "$out/subdirectory"
  echo "-- FetchContent from a source archive of this checkout (its committed and new files)"
  (git ls-files -z --cached --others --exclude-standard | xargs -0 ls -d 2>/dev/null |
     tar -czf "$out/llminfer-src.tar.gz" --transform 's,^,llminfer/,' -T -)
  cmake -S $consumer -B "$out/fetchcontent" "${common[@]}" -DHOW=fetchcontent \
    -DLLMINFER_SOURCE="file://$out/llminfer-src.tar.gz"
  cmake --build "$out/fetchcontent"
  "$out/fetchcontent/consumer" "$out/fetchcontent"
}

t0=$SECONDS
lane_a >"$out/lane-a.log" 2>&1 & pa=$!
lane_b >"$out/lane-b.log" 2>&1 & pb=$!
failed=()
wait $pa || failed+=(A)
wait $pb || failed+=(B)
echo "==== lane A (install, find_package, pkg-config)"; cat "$out/lane-a.log"
echo "==== lane B (add_subdirectory, FetchContent)"; cat "$out/lane-b.log"
if [ ${#failed[@]} -gt 0 ]; then echo "cmake-check: FAILED in lane(s) ${failed[*]} (see above)"; exit 1; fi
echo "cmake-check: every consumer passed ($((SECONDS - t0)) s)"
