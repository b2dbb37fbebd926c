#!/bin/bash
# Renders manifests for several jobs with `ringpilot k8s render` and checks every document
# offline: ConfigMap, PersistentVolumeClaim and the MPIJob's pod templates against the
# Kubernetes OpenAPI schemas bundled in the kubernetes-validate package (strict: unknown
# fields fail); MPIJob and PodMonitor (CRDs, whose schemas that package does not ship)
# with structural checks of their own (validate_manifests.py).
# Usage: validate_manifests.sh RINGPILOT VENV_DIR
set -euo pipefail

ringpilot="$1"
venv="$2"
here="$(cd "$(dirname "$0")" && pwd)"
pkg="kubernetes-validate==1.37.0"

if ! "$venv/bin/python" -c 'import kubernetes_validate' 2>/dev/null; then
  echo "validate_manifests: installing $pkg into $venv"
  python3 -m venv "$venv" || {
    echo "validate_manifests: FAIL: cannot create a venv (install python3-venv)" >&2
    exit 1
  }
  "$venv/bin/python" -m pip install -q "$pkg" || {
    echo "validate_manifests: FAIL: pip cannot install $pkg (no network or no PyPI mirror?)" >&2
    exit 1
  }
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/gpu.yaml" <<'JOB'
name: bert-gpu
world: {nodes: 3, procs_per_node: 8, device: cuda}
launch: {backend: k8s}
model: {name: bert-base}
k8s: {image: "registry.example.com/ml/ringpilot:0.1", namespace: "123",
      rdma_resource: rdma/ib, shm_size: 64Gi, storage_class: cephfs-rwx}
JOB
cat > "$tmp/cpu.yaml" <<'JOB'
name: cpu-smoke
world: {nodes: 2, procs_per_node: 2, device: cpu}
launch: {backend: k8s}
model: {name: resnet18-cifar}
k8s: {image: "ringpilot@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
JOB
# No launch.backend (k8s render implies it), device auto (a GPU per rank), fractional CPUs.
cat > "$tmp/auto.yaml" <<'JOB'
name: auto-gpu
world: {nodes: 2, procs_per_node: 4, device: auto}
model: {name: resnet50}
k8s: {image: "registry.example.com/ml/ringpilot:0.1", cpu_per_rank: 1500m, memory_per_rank: 12Gi}
JOB

# docs/kubernetes.md's ImageNet-on-a-PVC example, as the page shows it (the yaml block after
# its marker), with its data volume.
docs="$here/../../docs/kubernetes.md"
awk '/<!-- k8s-example: imagenet-pvc -->/ {found = 1; next}
     found && /^```yaml/ {inside = 1; next}
     inside && /^```/ {exit}
     inside {print}' "$docs" > "$tmp/imagenet.yaml"
if [[ ! -s $tmp/imagenet.yaml ]]; then
  echo "validate_manifests: FAIL: no imagenet-pvc example in $docs" >&2
  exit 1
fi

status=0
"$ringpilot" k8s render "$tmp/imagenet.yaml" > "$tmp/imagenet.k8s.yaml" || status=1
"$venv/bin/python" "$here/validate_manifests.py" "$ringpilot" "$tmp/imagenet.k8s.yaml" || status=1
"$venv/bin/python" - "$tmp/imagenet.k8s.yaml" <<'PY' || status=1
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
job = next(d for d in docs if d["kind"] == "MPIJob")
pod = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
vols = {v["name"]: v for v in pod["volumes"]}
mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
ok = (vols.get("data-0", {}).get("persistentVolumeClaim") == {"claimName": "imagenet", "readOnly": True}
      and mounts.get("data-0", {}).get("mountPath") == "/data" and mounts["data-0"].get("readOnly") is True)
print("validate_manifests: imagenet-pvc example: data-0 %s" % ("mounted at /data" if ok else "MISSING: %r %r" % (vols, mounts)))
sys.exit(0 if ok else 1)
PY
# A relative data path reaches nothing in the pods: refused (exit 2, naming the key).
sed 's|train: /data/imagenet/train|train: imagenet/train|' "$tmp/imagenet.yaml" > "$tmp/relative.yaml"
if "$ringpilot" k8s render "$tmp/relative.yaml" > /dev/null 2> "$tmp/relative.err"; then
  echo "validate_manifests: FAIL: a relative data.train was rendered" >&2
  status=1
elif ! grep -q "data.train: 'imagenet/train' is relative" "$tmp/relative.err"; then
  echo "validate_manifests: FAIL: relative data.train: $(cat "$tmp/relative.err")" >&2
  status=1
fi

for job in gpu cpu auto; do
  for variant in "" "--set metrics.enabled=false"; do
    out="$tmp/$job${variant:+-nometrics}.k8s.yaml"
    # shellcheck disable=SC2086  # variant is one or two words on purpose
    "$ringpilot" k8s render "$tmp/$job.yaml" $variant > "$out"
    "$venv/bin/python" "$here/validate_manifests.py" "$ringpilot" "$out" || status=1
  done
done
exit "$status"
