"""Validates a multi-document manifest rendered by `ringpilot k8s render`.

Core kinds go through kubernetes-validate (strict, bundled OpenAPI schemas). MPIJob
(kubeflow.org/v2beta1) and PodMonitor (monitoring.coreos.com/v1) are CRDs: their fields are
checked here against the CRDs' documented structure, and the MPIJob's pod templates are
validated as core v1 PodTemplates. The ConfigMap's job file is checked with
`ringpilot validate`.

Usage: validate_manifests.py RINGPILOT MANIFEST.yaml
"""

import re
import subprocess
import sys
import tempfile

import kubernetes_validate
import yaml

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
                      r"(([0-9]+)s)?(([0-9]+)ms)?)$")
RELABEL_ACTIONS = {"replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep",
                   "lowercase", "uppercase", "keepequal", "dropequal"}

errors = []


def check(ok, where, problem):
    if not ok:
        errors.append(f"{where}: {problem}")


def only_keys(obj, allowed, where):
    check(isinstance(obj, dict), where, "must be a mapping")
    if isinstance(obj, dict):
        extra = set(obj) - set(allowed)
        check(not extra, where, f"unknown fields {sorted(extra)}")


def k8s_validate(doc, where):
    try:
        kubernetes_validate.validate(doc, VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        errors.append(f"{where}: {e.message} at {'.'.join(str(p) for p in e.path)}")
    except kubernetes_validate.utils.SchemaNotFoundError as e:
        errors.append(f"{where}: no schema: {e}")


def check_metadata(doc, where):
    md = doc.get("metadata", {})
    check(DNS_LABEL.match(str(md.get("name", ""))), where, "metadata.name is not a DNS label")
    check(DNS_LABEL.match(str(md.get("namespace", ""))), where, "namespace is not a DNS label")


def check_mpijob(doc, where):
    only_keys(doc, {"apiVersion", "kind", "metadata", "spec"}, where)
    check_metadata(doc, where)
    spec = doc["spec"]
    only_keys(spec, {"slotsPerWorker", "runLauncherAsWorker", "runPolicy", "mpiReplicaSpecs",
                     "sshAuthMountPath", "launcherCreationPolicy", "mpiImplementation"},
              where + ".spec")
    check(isinstance(spec.get("slotsPerWorker"), int) and spec["slotsPerWorker"] >= 1, where,
          "slotsPerWorker must be a positive integer")
    check(spec.get("mpiImplementation") in {"OpenMPI", "Intel", "MPICH"}, where,
          "mpiImplementation")
    check(str(spec.get("sshAuthMountPath", "/")).startswith("/"), where, "sshAuthMountPath")
    rp = spec.get("runPolicy", {})
    only_keys(rp, {"cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
                   "backoffLimit", "schedulingPolicy", "suspend", "managedBy"},
              where + ".spec.runPolicy")
    check(rp.get("cleanPodPolicy", "None") in {"None", "Running", "All"}, where, "cleanPodPolicy")
    check(isinstance(rp.get("backoffLimit", 0), int), where, "backoffLimit")
    replicas = spec["mpiReplicaSpecs"]
    only_keys(replicas, {"Launcher", "Worker"}, where + ".spec.mpiReplicaSpecs")
    check(replicas["Launcher"].get("replicas") == 1, where, "exactly one Launcher replica")
    for role, rs in replicas.items():
        w = f"{where}.spec.mpiReplicaSpecs.{role}"
        only_keys(rs, {"replicas", "template", "restartPolicy"}, w)
        check(isinstance(rs.get("replicas"), int) and rs["replicas"] >= 1, w, "replicas")
        check(rs.get("restartPolicy") in {"Always", "OnFailure", "Never", "ExitCode"}, w,
              "restartPolicy")
        # The replica's pod template is a core PodTemplateSpec: validate it as one.
        k8s_validate({"apiVersion": "v1", "kind": "PodTemplate",
                      "metadata": {"name": f"{doc['metadata']['name']}-{role.lower()}"},
                      "template": rs["template"]}, w + ".template")
        ctx = rs["template"]["spec"]
        check(ctx["securityContext"].get("runAsNonRoot") is True, w, "runAsNonRoot")
        check(ctx["securityContext"].get("runAsUser", 0) > 0, w, "runAsUser must not be 0")


def check_podmonitor(doc, where):
    only_keys(doc, {"apiVersion", "kind", "metadata", "spec"}, where)
    check_metadata(doc, where)
    spec = doc["spec"]
    only_keys(spec, {"selector", "namespaceSelector", "podMetricsEndpoints", "jobLabel",
                     "podTargetLabels", "sampleLimit", "targetLimit", "attachMetadata"},
              where + ".spec")
    only_keys(spec["selector"], {"matchLabels", "matchExpressions"}, where + ".spec.selector")
    only_keys(spec["namespaceSelector"], {"any", "matchNames"}, where + ".spec.namespaceSelector")
    eps = spec["podMetricsEndpoints"]
    check(isinstance(eps, list) and eps, where, "podMetricsEndpoints must be a non-empty list")
    for i, ep in enumerate(eps):
        w = f"{where}.spec.podMetricsEndpoints[{i}]"
        only_keys(ep, {"port", "portNumber", "targetPort", "path", "scheme", "params",
                       "interval", "scrapeTimeout", "honorLabels", "honorTimestamps",
                       "relabelings", "metricRelabelings", "basicAuth", "bearerTokenSecret",
                       "tlsConfig", "filterRunning", "enableHttp2", "proxyUrl"}, w)
        check(str(ep.get("path", "/")).startswith("/"), w, "path")
        check(DURATION.match(str(ep.get("interval", "0"))), w, "interval is not a duration")
        # Our series carry no label Prometheus sets itself: honoring them is not needed,
        # and would let a scraped label override the target's.
        check("honorLabels" not in ep, w, "honorLabels must not be set (no `job` label to keep)")
        check(ep.get("scheme", "http") in ("http", "https"), w, "scheme")
        targets = {rl.get("targetLabel") for rl in ep.get("relabelings", [])}
        check({"__address__", "ringpilot_job", "ringpilot_run"} <= targets, w,
              "relabelings must set __address__, ringpilot_job and ringpilot_run")
        for j, rl in enumerate(ep.get("relabelings", [])):
            rw = f"{w}.relabelings[{j}]"
            only_keys(rl, {"action", "sourceLabels", "separator", "regex", "modulus",
                           "replacement", "targetLabel"}, rw)
            check(rl.get("action", "replace") in RELABEL_ACTIONS, rw, "action")
            check(all(LABEL_NAME.match(s) for s in rl.get("sourceLabels", [])), rw,
                  "sourceLabels")
            try:
                re.compile(rl.get("regex", "(.*)"))
            except re.error as e:
                errors.append(f"{rw}: regex: {e}")


def check_job_file(ringpilot, doc, where):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(doc["data"]["job.yaml"])
        f.flush()
        r = subprocess.run([ringpilot, "validate", f.name], capture_output=True, text=True)
        check(r.returncode == 0, where, "job.yaml does not validate: " + r.stderr.strip())


def main():
    ringpilot, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    kinds = []
    for i, doc in enumerate(docs):
        kind = doc.get("kind")
        kinds.append(kind)
        where = f"{path}[{i}] {kind}"
        if kind == "MPIJob":
            check(doc.get("apiVersion") == "kubeflow.org/v2beta1", where, "apiVersion")
            check_mpijob(doc, where)
        elif kind == "PodMonitor":
            check(doc.get("apiVersion") == "monitoring.coreos.com/v1", where, "apiVersion")
            check_podmonitor(doc, where)
        else:
            k8s_validate(doc, where)
            if kind == "ConfigMap":
                check_job_file(ringpilot, doc, where)
    check({"ConfigMap", "PersistentVolumeClaim", "MPIJob"} <= set(kinds), path,
          f"missing documents, got {kinds}")
    for e in errors:
        print("FAIL:", e)
    if not errors:
        print(f"ok: {path}: {len(docs)} documents ({', '.join(kinds)}) valid for "
              f"Kubernetes {VERSION}")
    return 1 if errors else 0


VERSION = kubernetes_validate.utils.latest_version()

if __name__ == "__main__":
    sys.exit(main())
