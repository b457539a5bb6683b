#!/usr/bin/env bash
# What the deploy files promise, checked against the files and the binaries:
# every non-system shared library the tarball's binaries load (what
# deploy/make-relocatable.sh bundles) is named in THIRD_PARTY_NOTICES.md,
# and the tarball and the image ship LICENSE and the notices; the Kubernetes
# Deployment asks for the CUDA backend (never SERVING on the CPU), its grace
# period covers preStop + --drain_deadline, a PodDisruptionBudget is part
# of the kustomization; the image has a HEALTHCHECK and a .dockerignore that
# keeps builds out of the context. The co-located form (deploy/colocated):
# its YAML parses, every container/service shares the GPU, the MPS pipe
# directory, /dev/shm, the socket directory and one user as its README says,
# the server runs --backend=cuda --enable_regions on the shared socket, grace
# periods cover the drain; run-local.sh passes bash -n and, without MPS
# (TOPK_MPS=0), brings the given server up on a unix socket, prints the
# exports and cleans up on SIGTERM. deploy/k8s's mutual TLS (cert-manager
# Certificate, the Secret mounted where the TLS flags point, probes with the
# pod's certificate) and its HPA on the saturation metric agree.
# Usage: deploy_test.sh SOURCE_DIR TOPK_SERVER TOPK_CLI [BINARY...]
set -euo pipefail
src=$1; shift
server_bin=$1 cli_bin=$2
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

# The co-located form.
colocated=$src/deploy/colocated
bash -n "$colocated/run-local.sh" || fail "run-local.sh does not parse"
[ -x "$colocated/run-local.sh" ] || fail "run-local.sh is not executable"
grep -qF 'deploy/colocated' "$src/deploy/README.md" || fail "deploy/README.md does not link deploy/colocated"
# The manifests, both forms. deploy/k8s's mutual TLS and autoscaling: the
# Certificate's Secret is mounted whole where the TLS flags point, /tmp is
# writable under the read-only root (the watched copies), the probes present
# the pod's own certificate, the HPA scales this Deployment (which leaves
# replicas to it) on the metric the adapter rule makes of a series the
# server exports.
python3 - "$src" <<'EOF' || fail "deploy manifests"
import os, re, sys
try:
    import yaml
except ImportError:
    print("deploy: PyYAML missing, the YAML checks are skipped")
    sys.exit(0)
src = sys.argv[1]
form = ["deploy/k8s"]  # which form the checks below are on
def fail(msg):
    print("FAIL: %s: %s" % (form[0], msg))
    sys.exit(1)
def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]
k8s = os.path.join(src, "deploy", "k8s")
def k8s_file(name):
    return load_all(os.path.join(k8s, name))
resources = k8s_file("kustomization.yaml")[0]["resources"]
for name in ("certificate.yaml", "hpa.yaml"):
    if name not in resources:
        fail(name + " is not in the kustomization")
if "prometheus-adapter-rules.yaml" in resources:
    fail("the adapter's rules belong to the adapter's configuration, not the kustomization")
dep = k8s_file("deployment.yaml")[0]
if "replicas" in dep["spec"]:
    fail("the Deployment sets replicas, which the HPA owns")
pod = dep["spec"]["template"]["spec"]
server = pod["containers"][0]
flags = dict(a[2:].split("=", 1) for a in server["args"] if a.startswith("--") and "=" in a)
certs = [d for d in k8s_file("certificate.yaml") if d["kind"] == "Certificate"]
server_cert = [c for c in certs if "server auth" in c["spec"].get("usages", [])]
if len(server_cert) != 1:
    fail("expected one server Certificate")
server_cert = server_cert[0]["spec"]
if "client auth" not in server_cert["usages"]:
    fail("the server Certificate lacks client auth, which its probes present")
volume = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == server_cert["secretName"]]
if len(volume) != 1:
    fail("the Certificate's Secret " + server_cert["secretName"] + " is not a volume")
mount = [m for m in server["volumeMounts"] if m["name"] == volume[0]["name"]]
if len(mount) != 1 or "subPath" in mount[0]:
    fail("the TLS Secret must be mounted whole (a subPath mount is never updated)")
root = mount[0]["mountPath"]
want = {"tls_cert": "tls.crt", "tls_key": "tls.key", "tls_client_ca": "ca.crt"}
for flag, key in want.items():
    if flags.get(flag) != root + "/" + key:
        fail("--%s should be %s/%s, is %s" % (flag, root, key, flags.get(flag)))
if not re.fullmatch(r"\d+s", flags.get("tls_reload_interval", "")):
    fail("no --tls_reload_interval=Ns")
if server["securityContext"].get("readOnlyRootFilesystem"):
    tmp = [m for m in server["volumeMounts"] if m["mountPath"] == "/tmp"]
    envs = {e["name"] for e in server.get("env", [])}
    if not tmp and "TMPDIR" not in envs:
        fail("read-only root without a writable /tmp or TMPDIR for the watched TLS copies")
for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
    cmd = server[kind].get("exec", {}).get("command", [])
    if cmd[1:2] != ["health"] or "--tls_cert=%s/tls.crt" % root not in cmd or \
            "--tls_key=%s/tls.key" % root not in cmd or server[kind].get("timeoutSeconds", 1) < 6:
        fail(kind + " is not topk-cli health with the pod's certificate and a timeout over 5 s")
hpa = k8s_file("hpa.yaml")[0]
ref = hpa["spec"]["scaleTargetRef"]
if ref["kind"] != "Deployment" or ref["name"] != dep["metadata"]["name"]:
    fail("the HPA does not scale " + dep["metadata"]["name"])
if hpa["spec"]["minReplicas"] < 2:
    fail("minReplicas below 2: the PodDisruptionBudget could never evict")
metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
rule = [r for r in k8s_file("prometheus-adapter-rules.yaml")[0]["rules"] if r["name"]["as"] == metric]
if len(rule) != 1:
    fail("no adapter rule serves " + metric)
series = re.match(r"(\w+)\{", rule[0]["seriesQuery"]).group(1)
for named_in in ("server/transport/metrics.cc", "docs/service.md"):
    with open(os.path.join(src, named_in)) as f:
        text = f.read()
    if '"%s"' % series not in text and "`%s" % series not in text:
        fail(series + " is not in " + named_in)
print("deploy: k8s mutual TLS (Secret at %s) and HPA on %s <- %s ok" % (root, metric, series))

form[0] = "deploy/colocated"
root = os.path.join(src, "deploy", "colocated")
def drain_s(args):
    for a in args:
        m = re.fullmatch(r"--drain_deadline=(\d+)s", a)
        if m:
            return int(m.group(1))
    fail("no --drain_deadline=Ns in " + str(args))
def server_socket(args):
    for flag in ("--backend=cuda", "--enable_regions"):
        if flag not in args:
            fail("the server runs without " + flag)
    listen = [a for a in args if a.startswith("--listen=")]
    if len(listen) != 1 or not listen[0].startswith("--listen=unix:/"):
        fail("the server does not listen on one unix socket: " + str(listen))
    return listen[0][len("--listen=unix:"):]

# Docker Compose.
compose = load_all(os.path.join(root, "compose.yaml"))[0]
services = compose["services"]
for name in ("mps-daemon", "topk-server", "frontend"):
    if name not in services:
        fail("compose.yaml has no service " + name)
def mounts(svc):
    return dict(reversed(v.split(":")[:2]) for v in svc.get("volumes", []))
pipe = services["mps-daemon"]["environment"]["CUDA_MPS_PIPE_DIRECTORY"]
gpus = None
for name, svc in services.items():
    env = svc.get("environment", {})
    if env.get("CUDA_MPS_PIPE_DIRECTORY") != pipe or "CUDA_MPS_LOG_DIRECTORY" not in env:
        fail(name + ": CUDA_MPS_PIPE_DIRECTORY/LOG_DIRECTORY not set as in mps-daemon")
    if mounts(svc).get(pipe) != "mps-pipe":
        fail(name + ": the pipe directory " + pipe + " is not the mps-pipe volume")
    if svc.get("user") != services["mps-daemon"]["user"]:
        fail(name + ": not the same user as the others")
    ids = [d.get("device_ids") for d in svc["deploy"]["resources"]["reservations"]["devices"]]
    if gpus is None:
        gpus = ids
    if ids != gpus or not ids[0]:
        fail(name + ": not the same GPU device_ids as the others")
    if name != "mps-daemon" and svc.get("ipc") != "service:mps-daemon":
        fail(name + ": does not join mps-daemon's IPC namespace (/dev/shm)")
if services["mps-daemon"].get("ipc") != "shareable":
    fail("mps-daemon is not ipc: shareable")
srv = services["topk-server"]
socket = server_socket(list(srv["entrypoint"][1:]) + list(srv.get("command", [])))
sockdir = os.path.dirname(socket)
for name in ("topk-server", "frontend"):
    if sockdir not in mounts(services[name]):
        fail(name + ": " + sockdir + " is not a shared volume")
if mounts(srv)[sockdir] != mounts(services["frontend"])[sockdir]:
    fail("the server and the frontend mount different volumes at " + sockdir)
if srv["healthcheck"]["test"][-1] != "--target=unix:" + socket:
    fail("the server's healthcheck does not ask over the socket")
grace = int(re.fullmatch(r"(\d+)s", srv["stop_grace_period"]).group(1))
if grace <= drain_s(srv["command"]):
    fail("stop_grace_period does not cover --drain_deadline")

# Kubernetes: both forms.
def kustomized(d):
    k = load_all(os.path.join(d, "kustomization.yaml"))[0]
    docs = []
    for r in k["resources"]:
        docs += load_all(os.path.join(d, r))
    return k, docs
def pod_checks(form, docs, sidecar):
    dep = [d for d in docs if d["kind"] == "Deployment"]
    if len(dep) != 1:
        fail(form + ": expected one Deployment")
    spec = dep[0]["spec"]["template"]["spec"]
    inits = spec.get("initContainers", [])
    names = [c["name"] for c in inits]
    want = ["mps-daemon", "topk-server"] if sidecar else ["topk-server"]
    if names != want or any(c.get("restartPolicy") != "Always" for c in inits):
        fail(form + ": native sidecars should be " + str(want) + ", got " + str(names))
    main = [c for c in spec["containers"] if c["name"] == "frontend"]
    if len(main) != 1:
        fail(form + ": no frontend container")
    everyone = inits + main
    sec = spec.get("securityContext", {})
    if not sec.get("runAsUser") or any("runAsUser" in c.get("securityContext", {}) for c in everyone):
        fail(form + ": one pod-level runAsUser for every container")
    server = inits[-1]
    args = server["args"]
    socket = server_socket(args)
    sockdir = os.path.dirname(socket)
    vols = {v["name"]: v for v in spec["volumes"]}
    def mount_map(c):
        return {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    if mount_map(server).get(sockdir) is None or mount_map(server)[sockdir] != mount_map(main[0]).get(sockdir):
        fail(form + ": the server and the frontend do not share " + sockdir)
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        cmd = server[kind]["exec"]["command"]
        if cmd[-2:] != ["health", "--target=unix:" + socket] or server[kind].get("timeoutSeconds", 1) < 6:
            fail(form + ": " + kind + " is not topk-cli health over the socket with a timeout over 5 s")
    grace = spec["terminationGracePeriodSeconds"]
    if grace < drain_s(args) + 20:
        fail(form + ": terminationGracePeriodSeconds %d does not cover the frontend's stop and --drain_deadline" % grace)
    if sidecar:
        claim = spec["resourceClaims"][0]["name"]
        template = spec["resourceClaims"][0]["resourceClaimTemplateName"]
        if not any(d["kind"] == "ResourceClaimTemplate" and d["metadata"]["name"] == template for d in docs):
            fail(form + ": the ResourceClaimTemplate " + template + " is not deployed")
        pipe = inits[0]["env"][0]["value"]
        for c in everyone:
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            if env.get("CUDA_MPS_PIPE_DIRECTORY") != pipe or "CUDA_MPS_LOG_DIRECTORY" not in env:
                fail(form + ": " + c["name"] + " lacks the CUDA_MPS_* settings")
            mm = mount_map(c)
            if mm.get(pipe) != mount_map(inits[0])[pipe] or mm.get("/dev/shm") != "dshm":
                fail(form + ": " + c["name"] + " does not mount the shared pipe directory and /dev/shm")
            if [x["name"] for x in c["resources"].get("claims", [])] != [claim]:
                fail(form + ": " + c["name"] + " does not name the GPU claim")
        if vols["dshm"]["emptyDir"].get("medium") != "Memory":
            fail(form + ": /dev/shm is not memory-backed")
    else:
        for c in (server, main[0]):
            if c["resources"]["limits"].get("nvidia.com/gpu") != 1:
                fail(form + ": " + c["name"] + " does not request one nvidia.com/gpu replica")
            if "/dev/shm" in mount_map(c):
                fail(form + ": " + c["name"] + " mounts /dev/shm over the device plugin's MPS mount")
        if spec.get("nodeSelector", {}).get("nvidia.com/gpu.count") != "1":
            fail(form + ": replicas of one GPU are not promised without one-GPU nodes")
k, docs = kustomized(os.path.join(root, "k8s"))
if "device-plugin-mps-config.yaml" in k["resources"]:
    fail("the device plugin's config belongs to the plugin's namespace, not the kustomization")
pod_checks("k8s", docs, sidecar=False)
cm = load_all(os.path.join(root, "k8s", "device-plugin-mps-config.yaml"))[0]
for key, text in cm["data"].items():
    conf = yaml.safe_load(text)
    res = conf["sharing"]["mps"]["resources"]
    if res[0]["name"] != "nvidia.com/gpu" or res[0]["replicas"] < 2:
        fail("the device plugin config does not share nvidia.com/gpu in >= 2 replicas")
_, docs = kustomized(os.path.join(root, "k8s", "sidecar"))
pod_checks("k8s/sidecar", docs, sidecar=True)
print("deploy: colocated compose and Kubernetes manifests ok")
EOF

# run-local.sh without MPS: the server comes up on its socket, the exports are
# printed, SIGTERM stops the server and removes the private directory.
out=$(mktemp -d)
TOPK_MPS=0 TOPK_CLI=$cli_bin TOPK_WAIT_S=30 "$colocated/run-local.sh" "$server_bin" --metrics_listen= \
  >"$out/stdout" 2>"$out/stderr" &
helper=$!
for _ in $(seq 300); do
  grep -q '^export TOPK_TARGET=unix:' "$out/stdout" && break
  kill -0 $helper 2>/dev/null || break
  sleep 0.1
done
target=$(sed -n 's/^export TOPK_TARGET=//p' "$out/stdout")
[ -n "$target" ] || { cat "$out/stderr"; fail "run-local.sh printed no TOPK_TARGET"; }
"$cli_bin" health --target="$target" >/dev/null || fail "run-local.sh's server is not SERVING on $target"
private=$(dirname "${target#unix:}")
kill -TERM $helper
wait $helper || true
[ ! -e "$private" ] || fail "run-local.sh left $private behind"
if command -v pgrep >/dev/null && pgrep -f -- "--listen=$target" >/dev/null; then
  fail "run-local.sh left its server running"
fi
rm -rf "$out"
echo "deploy: run-local.sh brought the server up on $target and cleaned up"

echo "deploy: $checked bundled libraries named; manifests, image and tarball ok"
