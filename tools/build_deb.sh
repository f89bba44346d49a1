#!/usr/bin/env bash
# Packs a built tree into a Debian package, so a cluster administrator can
# `apt install ./fanout_VERSION_ARCH.deb`: the programs, the Python shim, man pages (generated from
# --help at build time), bash completion, and the docs. The binaries find the shim beside
# themselves (../share/fanout), so the tree is installed under /usr whatever the build's prefix.
# Usage: tools/build_deb.sh [BUILD_DIR (default build)] [OUT_DIR (default BUILD_DIR)]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
out=$(mkdir -p "${2:-$build}" && cd "${2:-$build}" && pwd)
for t in dpkg-deb dpkg-shlibdeps help2man; do
  command -v "$t" >/dev/null || { echo "build_deb: $t is missing (tools/deps-debian.txt)" >&2; exit 1; }
done
# A test build (-Dtest_hooks=true, as tools/build.sh configures) carries failure-injection hooks
# that a shipped program must not.
hooks=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"]=="test_hooks"), False))')
if [ "$hooks" = True ]; then
  echo "build_deb: $build is a test build (-Dtest_hooks=true); package a build configured without it," \
    "e.g. meson setup build-release --buildtype=release -Dtests=disabled" >&2
  exit 1
fi
for m in fanout fanout-interchange fanout-pool; do
  [ -f "$build/tools/packaging/$m.1" ] ||
    { echo "build_deb: $build/tools/packaging/$m.1 is missing: build first (tools/build.sh)" >&2; exit 1; }
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
meson install -C "$build" --destdir "$root" --no-rebuild --quiet
prefix=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
if [ "$prefix" != /usr ]; then  # relocate PREFIX/* to /usr
  mkdir -p "$root/usr"
  cp -a "$root$prefix/." "$root/usr/"
  rm -rf "${root:?}$prefix"
  rmdir -p --ignore-fail-on-non-empty "$(dirname "$root$prefix")" 2>/dev/null || true
fi
rm -f "$root/usr/bin/fanout-pool-load"  # a benchmark of the source tree (docs/scaling.md)
strip --strip-unneeded "$root"/usr/bin/*  # as Debian ships programs; debug info stays in the build
gzip -9n "$root"/usr/share/man/man1/*.1
doc=$root/usr/share/doc/fanout
mkdir -p "$doc"
cp "$top/README.md" "$top"/docs/*.md "$doc/"
cp "$top/LICENSE" "$doc/copyright"
cp -r "$top/docs/examples" "$doc/examples"
find "$doc/examples" -name out -prune -exec rm -rf {} +

version=$(meson introspect "$build" --projectinfo |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
arch=$(dpkg --print-architecture)
# The shared libraries' packages, as dpkg-shlibdeps finds them (it wants a debian/control).
mkdir -p "$stage/debian"
printf 'Source: fanout\n\nPackage: fanout\nArchitecture: any\n' > "$stage/debian/control"
shlibs=$(cd "$stage" && dpkg-shlibdeps -O -e"$root/usr/bin/fanout" -e"$root/usr/bin/fanout-interchange" \
  -e"$root/usr/bin/fanout-pool" -e"$root/usr/bin/fanout-worker" -e"$root/usr/bin/fanout-zmq-relay" \
  2>/dev/null | sed -n 's/^shlibs:Depends=//p')
installed_kb=$(du -sk "$root/usr" | cut -f1)
mkdir -p "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: fanout
Version: $version
Architecture: $arch
Maintainer: fanout developers <fanout@localhost>
Installed-Size: $installed_kb
Depends: $shlibs, python3
Suggests: python3-pandas, chromium
Section: science
Priority: optional
Homepage: https://github.com/fanout/fanout
Description: run a program over a large input in parallel
 fanout cuts an input into mini-batches and runs a user's program over them in
 worker pools on one machine or a cluster, brokered over ZeroMQ (CurveZMQ on
 TCP) by an interchange, recording every job, attempt and retry in SQLite. It
 runs Azure ML ParallelRunStep entry scripts and parallel-job YAML unchanged.
CONTROL
deb=$out/fanout_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
