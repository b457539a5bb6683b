#!/usr/bin/env bash
# Makes a relocatable tree: DEST/bin holds the given executables, DEST/lib the
# non-system shared libraries they need; every binary's rpath is $ORIGIN/../lib.
# Usage: deploy/make-relocatable.sh DEST BINARY... [--lib SHARED_LIB...]
# The result runs on hosts without the build dependencies (e.g. the GPU machine).
set -euo pipefail
dest=$1; shift
mkdir -p "$dest/bin" "$dest/lib"
system_libs='^(linux-vdso|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|ld-linux|libgcc_s\.so|libstdc\+\+\.so|libcuda\.so)'
copy_deps() {
  ldd "$1" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    [[ $name =~ $system_libs ]] && continue
    [ -e "$dest/lib/$name" ] || cp -L "$path" "$dest/lib/$name"
  done
}
mode=bin
for f in "$@"; do
  if [ "$f" = "--lib" ]; then mode=lib; continue; fi
  cp -L "$f" "$dest/$mode/"
  copy_deps "$f"
  if command -v patchelf >/dev/null; then
    patchelf --set-rpath '$ORIGIN/../lib' "$dest/$mode/$(basename "$f")"
  fi
done
for l in "$dest"/lib/*.so*; do
  command -v patchelf >/dev/null && patchelf --set-rpath '$ORIGIN' "$l" || true
done
du -sh "$dest"
