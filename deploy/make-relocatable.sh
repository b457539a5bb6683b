#!/usr/bin/env bash
# Makes a relocatable tree: DEST/bin holds the given executables, DEST/lib the
# given shared libraries and every non-system shared library any of them
# needs; executables get the rpath $ORIGIN/../lib, libraries $ORIGIN.
# Usage: deploy/make-relocatable.sh DEST BINARY... [--lib SHARED_LIB...]
# Files already inside DEST (an install tree) are fixed up in place.
# The result runs on hosts without the build dependencies (e.g. the GPU machine).
set -euo pipefail
dest=$1; shift
mkdir -p "$dest/bin" "$dest/lib"
# The C/C++ runtime and the NVIDIA driver always come from the host.
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
  target=$dest/$mode/$(basename "$f")
  [ "$(realpath "$f")" = "$(realpath -m "$target")" ] || cp -L "$f" "$target"
  copy_deps "$f"
  if [ "$mode" = bin ] && command -v patchelf >/dev/null; then
    patchelf --set-rpath '$ORIGIN/../lib' "$target"
  fi
done
for l in "$dest"/lib/*.so*; do
  command -v patchelf >/dev/null && patchelf --set-rpath '$ORIGIN' "$l" || true
done
du -sh "$dest"
