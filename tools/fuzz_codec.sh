#!/bin/sh
# Builds tests/fuzz/codec_fuzz.cpp with clang's libFuzzer and AddressSanitizer and runs it for a
# bounded time. Usage: fuzz_codec.sh SOURCE_ROOT WORK_DIR SECONDS. Exit 77 (skipped) when clang++
# or libFuzzer is missing; nonzero when the fuzzer finds a crash (the reproducer is in WORK_DIR).
set -eu
src=$1
work=$2
secs=${3:-60}
cxx=${FANOUT_FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz: $cxx not found (Debian: clang, libclang-rt-14-dev); skipped"
  exit 77
fi
mkdir -p "$work/corpus"
flags="-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -DMSGPACK_NO_BOOST -DMSGPACK_DEFAULT_API_VERSION=3 -I$src/src"
# shellcheck disable=SC2086
if ! "$cxx" $flags -o "$work/codec_fuzz" "$src/tests/fuzz/codec_fuzz.cpp" \
    "$src/src/fanout/protocol/codec.cpp" "$src/src/fanout/util/error.cpp" -lfmt \
    >"$work/build.log" 2>&1; then
  if grep -q "libclang_rt.fuzzer\|fuzzer.*not found\|cannot find.*fuzzer" "$work/build.log"; then
    echo "fuzz: libFuzzer is not installed (Debian: libclang-rt-14-dev); skipped"
    cat "$work/build.log"
    exit 77
  fi
  cat "$work/build.log"
  exit 1
fi
cd "$work"
# -rss_limit_mb: a frame must never make the decoder allocate without bound.
exec ./codec_fuzz -max_total_time="$secs" -rss_limit_mb=1024 -timeout=10 -max_len=4096 \
  -print_final_stats=1 corpus
