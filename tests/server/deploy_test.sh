#!/usr/bin/env bash
# What the deploy files promise, checked against the files and the binaries:
# every non-system shared library the tarball's binaries load (what
# deploy/make-relocatable.sh bundles) is named in THIRD_PARTY_NOTICES.md,
# and the tarball and the image ship LICENSE and the notices; the Kubernetes
# Deployment asks for the CUDA backend (never SERVING on the CPU), its grace
# period covers preStop + --drain_deadline, a PodDisruptionBudget is part
# of the kustomization; the image has a HEALTHCHECK and a .dockerignore that
# keeps builds out of the context.
# Usage: deploy_test.sh SOURCE_DIR BINARY...
set -euo pipefail
src=$1; shift
fail() { echo "FAIL: $*"; exit 1; }
notices=$src/THIRD_PARTY_NOTICES.md
k8s=$src/deploy/k8s

# The same filter as make-relocatable.sh: these come from the host.
system_libs='^(linux-vdso|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|ld-linux|libgcc_s\.so|libstdc\+\+\.so|libcuda\.so)'
checked=0
for lib in $(for b in "$@"; do ldd "$b" | awk '/=> \//{print $1}'; done | sort -u); do
  [[ $lib =~ $system_libs ]] && continue
  base=${lib%%.so*}
  # Named as `libfoo.so`, or as a family (`libabsl_*.so`).
  if ! grep -qF "\`$base.so\`" "$notices"; then
    family=${base%%_*}
    grep -qF "\`${family}_*.so\`" "$notices" || fail "$lib is bundled but not in THIRD_PARTY_NOTICES.md"
  fi
  checked=$((checked + 1))
done
[ $checked -gt 10 ] || fail "only $checked bundled libraries found: is ldd working?"

grep -q 'cp LICENSE THIRD_PARTY_NOTICES.md' "$src/deploy/package.sh" || fail "package.sh ships no notices"
grep -q '^COPY LICENSE THIRD_PARTY_NOTICES.md' "$src/deploy/Dockerfile" || fail "the image ships no notices"
grep -q '^HEALTHCHECK ' "$src/deploy/Dockerfile" || fail "the Dockerfile has no HEALTHCHECK"
grep -qx 'build\*' "$src/.dockerignore" || fail ".dockerignore does not keep build trees out"

deployment=$k8s/deployment.yaml
grep -q -- '- --backend=cuda$' "$deployment" || fail "the Deployment does not ask for --backend=cuda"
! grep -q -- '--backend=auto\|--backend=cpu' "$deployment" || fail "the Deployment may serve on the CPU"
grace=$(sed -n 's/^ *terminationGracePeriodSeconds: *\([0-9]*\)$/\1/p' "$deployment")
pre_stop=$(grep -o '"/bin/sleep", "[0-9]*"' "$deployment" | grep -o '[0-9]*"$' | tr -d '"')
drain=$(sed -n 's/^ *- --drain_deadline=\([0-9]*\)s$/\1/p' "$deployment")
[ -n "$grace" ] && [ -n "$pre_stop" ] && [ -n "$drain" ] || fail "grace, preStop or drain not found"
[ "$grace" -gt $((pre_stop + drain)) ] ||
  fail "terminationGracePeriodSeconds $grace does not cover preStop $pre_stop s + drain $drain s"
grep -q '^kind: PodDisruptionBudget' "$k8s/pdb.yaml" || fail "no PodDisruptionBudget"
grep -q -- '- pdb.yaml' "$k8s/kustomization.yaml" || fail "the PodDisruptionBudget is not deployed"
echo "deploy: $checked bundled libraries named; manifests, image and tarball ok"
