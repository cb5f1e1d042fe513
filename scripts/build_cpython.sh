#!/usr/bin/env bash
# Build CPython 3.13.15 from Debian's source package (forky's python3.13 3.13.15-1: upstream's release tarball,
# its .orig.tar.xz) into a cache folder, once, and print the interpreter's path. NeMo-Gym 0.5-0.7 ask for
# Python >= 3.13.14, which no registry ships as a binary this Debian (bookworm, glibc 2.36) can run.
#
# The tarball is trusted through Debian's archive signature: forky's InRelease is checked with gpgv against
# the archive keyring, the source index's sha256 against InRelease, the tarball's against the source index.
# The build takes about 5 minutes on 2 cores (build dependencies: build-essential and the -dev libraries
# setup.sh's machines have; a module whose library is missing, such as _gdbm, is left out, as configure says).
# Where: ${VERIHUB_CPYTHON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/verihub}/cpython-3.13.15 (remove it to rebuild).
set -euo pipefail
VERSION=3.13.15
DEBIAN_VERSION=3.13.15-1
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
CACHE=${VERIHUB_CPYTHON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/verihub}
PREFIX="$CACHE/cpython-$VERSION"
PYTHON="$PREFIX/bin/python3.13"

if "$PYTHON" -c "import sys, ssl, sqlite3, zlib, ctypes; sys.exit(sys.version.split()[0] != '$VERSION')" 2>/dev/null; then
  echo "$PYTHON"
  exit 0
fi
for tool in curl gpgv xz make cc; do
  command -v "$tool" >/dev/null || { echo "build_cpython: needs $tool" >&2; exit 1; }
done
[ -f "$KEYRING" ] || { echo "build_cpython: no $KEYRING (Debian's debian-archive-keyring)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
curl -sSf -o InRelease "$MIRROR/dists/forky/InRelease"
gpgv --keyring "$KEYRING" --output Release InRelease 2>/dev/null \
  || { echo "build_cpython: forky's InRelease does not verify against $KEYRING" >&2; exit 1; }
# sha256 and size of the source index, from the signed Release
read -r index_sha index_size < <(awk '/^SHA256:/{s=1;next} /^[^ ]/{s=0} s&&$3=="main/source/Sources.xz"{print $1, $2}' Release)
[ -n "${index_sha:-}" ] || { echo "build_cpython: InRelease lists no main/source/Sources.xz" >&2; exit 1; }
curl -sSf -o Sources.xz "$MIRROR/dists/forky/main/source/Sources.xz"
echo "$index_sha  Sources.xz" | sha256sum -c --quiet -
# the python3.13 paragraph at DEBIAN_VERSION: its directory and the tarball's sha256
xz -dc Sources.xz > Sources  # (a pipe into an awk that stops early would end xz with SIGPIPE)
awk -v want="$DEBIAN_VERSION" '
  /^Package: /{p=($2=="python3.13")} p&&/^Version: /{v=($2==want)} p&&v{print} p&&v&&/^$/{exit}' Sources > paragraph
tarball="python3.13_$VERSION.orig.tar.xz"
directory=$(sed -n 's/^Directory: //p' paragraph)
tarball_sha=$(awk -v f="$tarball" '/^Checksums-Sha256:/{s=1;next} /^[^ ]/{s=0} s&&$3==f{print $1}' paragraph)
[ -n "$directory" ] && [ -n "$tarball_sha" ] || {
  echo "build_cpython: forky no longer has python3.13 $DEBIAN_VERSION (see $MIRROR/pool/main/p/python3.13/)" >&2
  exit 1
}
echo "build_cpython: downloading and building CPython $VERSION into $PREFIX (about 5 minutes)" >&2
curl -sSf -o "$tarball" "$MIRROR/$directory/$tarball"
echo "$tarball_sha  $tarball" | sha256sum -c --quiet -
tar xJf "$tarball"
cd "Python-$VERSION"
partial="$PREFIX.partial"
rm -rf "$partial" "$PREFIX"
./configure -q --prefix="$PREFIX" --with-ensurepip=install >configure.log 2>&1 \
  || { tail -n 30 configure.log >&2; exit 1; }
make -s -j"$(nproc)" >make.log 2>&1 || { tail -n 40 make.log >&2; exit 1; }
make -s install DESTDIR="$partial" >install.log 2>&1 || { tail -n 40 install.log >&2; exit 1; }
# installed under DESTDIR with PREFIX's paths inside: moved into place whole, so a failed build leaves nothing
mkdir -p "$(dirname "$PREFIX")"
mv "$partial$PREFIX" "$PREFIX"
rm -rf "$partial"
"$PYTHON" -c "import ssl, sqlite3, zlib, ctypes" || { echo "build_cpython: $PYTHON lacks a core module" >&2; exit 1; }
echo "$PYTHON"
