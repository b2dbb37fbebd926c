#include "k8s/manifest.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/value_rules.h"

namespace ringpilot::k8s {
namespace {

using config::JobConfig;

constexpr const char* kJobLabel = "ringpilot.io/job";
constexpr const char* kRoleLabel = "ringpilot.io/role";

// Every user-derived string is written double-quoted, so that a value such as `123` or
// `true` stays a string when read back.
void Str(YAML::Emitter& e, const std::string& key, const std::string& value) {
  e << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
}

void Int(YAML::Emitter& e, const std::string& key, long long value) {
  e << YAML::Key << key << YAML::Value << value;
}

void Metadata(YAML::Emitter& e, const std::string& name, const JobConfig& c) {
  e << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  Str(e, "name", name);
  Str(e, "namespace", c.k8s.namespace_);
  e << YAML::Key << "labels" << YAML::Value << YAML::BeginMap;
  Str(e, "app.kubernetes.io/name", "ringpilot");
  Str(e, kJobLabel, c.name);
  e << YAML::EndMap << YAML::EndMap;
}

// k8s.volumes, parsed (the job's rules accepted every entry; one that fails here comes
// from a hand-built config and is left out after RenderDocuments refused it).
std::vector<config::K8sVolume> DataVolumes(const JobConfig& c) {
  std::vector<config::K8sVolume> out;
  for (const std::string& text : c.k8s.volumes) {
    std::string problem;
    if (std::optional<config::K8sVolume> v = config::ParseK8sVolume(text, &problem)) {
      out.push_back(*v);
    }
  }
  return out;
}

std::string DataVolumeName(std::size_t index) { return "data-" + std::to_string(index); }

// The paths a trainer job reads its data from: data.train and data.val (image_shards: each
// comma-separated file or pattern).
std::vector<std::pair<std::string, std::string>> DataPaths(const JobConfig& c) {
  std::vector<std::pair<std::string, std::string>> paths;
  if (config::RunsCommand(c)) return paths;  // a program's paths are its arguments
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"data.train", c.data.train},
                                   std::pair<std::string, std::string>{"data.val", c.data.val}}) {
    std::size_t start = 0;
    while (start <= value.size() && !value.empty()) {
      const std::size_t comma = value.find(',', start);
      std::string part = value.substr(start, comma == std::string::npos ? comma : comma - start);
      while (!part.empty() && part.front() == ' ') part.erase(0, 1);
      while (!part.empty() && part.back() == ' ') part.pop_back();
      if (!part.empty()) paths.emplace_back(key, part);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return paths;
}

void Header(YAML::Emitter& e, const std::string& api_version, const std::string& kind) {
  Str(e, "apiVersion", api_version);
  Str(e, "kind", kind);
}

std::string ConfigMapDoc(const JobConfig& c, const Names& n) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  Header(e, "v1", "ConfigMap");
  Metadata(e, n.configmap, c);
  e << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "job.yaml" << YAML::Value << YAML::Literal
    << config::EmitJobConfig(PodJobConfig(c));
  e << YAML::EndMap << YAML::EndMap;
  return e.c_str();
}

std::string PvcDoc(const JobConfig& c, const Names& n) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  Header(e, "v1", "PersistentVolumeClaim");
  Metadata(e, n.pvc, c);
  e << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  // The launcher and every worker mount it: ranks write logs, traces and checkpoints.
  e << YAML::Key << "accessModes" << YAML::Value << YAML::BeginSeq << "ReadWriteMany"
    << YAML::EndSeq;
  if (!c.k8s.storage_class.empty()) Str(e, "storageClassName", c.k8s.storage_class);
  e << YAML::Key << "resources" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "requests" << YAML::Value << YAML::BeginMap;
  Str(e, "storage", c.k8s.checkpoint_size);
  e << YAML::EndMap << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  return e.c_str();
}

void Volumes(YAML::Emitter& e, const JobConfig& c, const Names& n, bool worker) {
  e << YAML::Key << "volumes" << YAML::Value << YAML::BeginSeq;
  e << YAML::BeginMap;
  Str(e, "name", "job");
  e << YAML::Key << "configMap" << YAML::Value << YAML::BeginMap;
  Str(e, "name", n.configmap);
  e << YAML::EndMap << YAML::EndMap;
  e << YAML::BeginMap;
  Str(e, "name", "checkpoints");
  e << YAML::Key << "persistentVolumeClaim" << YAML::Value << YAML::BeginMap;
  Str(e, "claimName", n.pvc);
  e << YAML::EndMap << YAML::EndMap;
  if (worker) {
    // Containers get a 64 MiB /dev/shm by default; NCCL's SHM transport and the data
    // loader need far more.
    e << YAML::BeginMap;
    Str(e, "name", "dshm");
    e << YAML::Key << "emptyDir" << YAML::Value << YAML::BeginMap;
    Str(e, "medium", "Memory");
    Str(e, "sizeLimit", c.k8s.shm_size);
    e << YAML::EndMap << YAML::EndMap;
    // k8s.volumes: the data, where the job's paths point (RenderDocuments checked them).
    const std::vector<config::K8sVolume> data = DataVolumes(c);
    for (std::size_t i = 0; i < data.size(); ++i) {
      const config::K8sVolume& v = data[i];
      e << YAML::BeginMap;
      Str(e, "name", DataVolumeName(i));
      switch (v.kind) {
        case config::K8sVolume::Kind::kPvc:
          e << YAML::Key << "persistentVolumeClaim" << YAML::Value << YAML::BeginMap;
          Str(e, "claimName", v.source);
          if (v.read_only) e << YAML::Key << "readOnly" << YAML::Value << true;
          break;
        case config::K8sVolume::Kind::kHostPath:
          e << YAML::Key << "hostPath" << YAML::Value << YAML::BeginMap;
          Str(e, "path", v.source);
          Str(e, "type", "Directory");
          break;
        case config::K8sVolume::Kind::kNfs:
          e << YAML::Key << "nfs" << YAML::Value << YAML::BeginMap;
          Str(e, "server", v.server);
          Str(e, "path", v.source);
          if (v.read_only) e << YAML::Key << "readOnly" << YAML::Value << true;
          break;
      }
      e << YAML::EndMap << YAML::EndMap;
    }
  }
  e << YAML::EndSeq;
}

void VolumeMounts(YAML::Emitter& e, const JobConfig& c, bool worker) {
  e << YAML::Key << "volumeMounts" << YAML::Value << YAML::BeginSeq;
  e << YAML::BeginMap;
  Str(e, "name", "job");
  Str(e, "mountPath", kJobDir);
  e << YAML::Key << "readOnly" << YAML::Value << true << YAML::EndMap;
  e << YAML::BeginMap;
  Str(e, "name", "checkpoints");
  Str(e, "mountPath", kCheckpointDir);
  e << YAML::EndMap;
  if (worker) {
    e << YAML::BeginMap;
    Str(e, "name", "dshm");
    Str(e, "mountPath", "/dev/shm");
    e << YAML::EndMap;
    const std::vector<config::K8sVolume> data = DataVolumes(c);
    for (std::size_t i = 0; i < data.size(); ++i) {
      e << YAML::BeginMap;
      Str(e, "name", DataVolumeName(i));
      Str(e, "mountPath", data[i].mount);
      if (data[i].read_only) e << YAML::Key << "readOnly" << YAML::Value << true;
      e << YAML::EndMap;
    }
  }
  e << YAML::EndSeq;
}

// Worker pods: CPU and memory with requests equal to limits (Guaranteed QoS: the static CPU
// manager gives them whole cores of their own, and they are the last to be evicted), GPUs
// and the RDMA device (extended resources: limits only). The launcher only runs
// `ringpilot run` and mpirun: a small fixed request.
void Resources(YAML::Emitter& e, const JobConfig& c, bool worker) {
  e << YAML::Key << "resources" << YAML::Value << YAML::BeginMap;
  if (!worker) {
    e << YAML::Key << "requests" << YAML::Value << YAML::BeginMap;
    Str(e, "cpu", kLauncherCpu);
    Str(e, "memory", kLauncherMemory);
    e << YAML::EndMap;
    e << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
    Str(e, "memory", kLauncherMemory);
    e << YAML::EndMap << YAML::EndMap;
    return;
  }
  const WorkerResources r = WorkerResourcesFor(c);
  for (const char* kind : {"requests", "limits"}) {
    e << YAML::Key << kind << YAML::Value << YAML::BeginMap;
    Str(e, "cpu", r.cpu);
    Str(e, "memory", r.memory);
    if (std::string(kind) == "limits") {
      if (r.gpus > 0) Int(e, "nvidia.com/gpu", r.gpus);
      if (!c.k8s.rdma_resource.empty()) Int(e, c.k8s.rdma_resource, 1);
    }
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
}

void PodTemplate(YAML::Emitter& e, const JobConfig& c, const Names& n, bool worker) {
  const std::string role = worker ? "worker" : "launcher";
  e << YAML::Key << "template" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "labels" << YAML::Value << YAML::BeginMap;
  Str(e, "app.kubernetes.io/name", "ringpilot");
  Str(e, kJobLabel, c.name);
  Str(e, kRoleLabel, role);
  e << YAML::EndMap << YAML::EndMap;

  e << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "securityContext" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "runAsNonRoot" << YAML::Value << true;
  Int(e, "runAsUser", c.k8s.run_as_user);
  Int(e, "runAsGroup", c.k8s.run_as_user);
  Int(e, "fsGroup", c.k8s.run_as_user);
  e << YAML::EndMap;
  e << YAML::Key << "containers" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  Str(e, "name", role);
  Str(e, "image", c.k8s.image);
  e << YAML::Key << "command" << YAML::Value << YAML::BeginSeq;
  if (worker) {
    // The launcher's mpirun starts ranks over ssh; a non-root sshd listens on kSshPort.
    for (const char* w : {"/usr/sbin/sshd", "-De", "-f"}) e << YAML::DoubleQuoted << w;
    e << YAML::DoubleQuoted << std::string(kHome) + "/.sshd_config";
  } else {
    for (const std::string& w :
         {std::string(kRingpilotPath), std::string("run"), std::string(kJobDir) + "/job.yaml",
          std::string("--run-dir"), std::string(kCheckpointDir) + "/" + c.name}) {
      e << YAML::DoubleQuoted << w;
    }
  }
  e << YAML::EndSeq;
  if (worker) {
    e << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq;
    e << YAML::BeginMap;
    Str(e, "name", "ssh");
    Int(e, "containerPort", kSshPort);
    e << YAML::EndMap << YAML::EndSeq;
  }
  Resources(e, c, worker);
  e << YAML::Key << "securityContext" << YAML::Value << YAML::BeginMap;
  // RDMA registers (pins) memory: IPC_LOCK lifts the memlock limit.
  e << YAML::Key << "capabilities" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "add" << YAML::Value << YAML::BeginSeq << "IPC_LOCK" << YAML::EndSeq;
  e << YAML::EndMap << YAML::EndMap;
  VolumeMounts(e, c, worker);
  e << YAML::EndMap << YAML::EndSeq;  // container, containers
  Volumes(e, c, n, worker);
  e << YAML::EndMap << YAML::EndMap;  // spec, template
}

std::string MpiJobDoc(const JobConfig& c, const Names& n) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  Header(e, "kubeflow.org/v2beta1", "MPIJob");
  Metadata(e, n.mpijob, c);
  e << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  Int(e, "slotsPerWorker", c.world.procs_per_node);
  Str(e, "mpiImplementation", "OpenMPI");
  Str(e, "sshAuthMountPath", std::string(kHome) + "/.ssh");
  e << YAML::Key << "runPolicy" << YAML::Value << YAML::BeginMap;
  // ringpilot run restarts the MPI job itself (launch.max_restarts); the operator restarts
  // a failed launcher pod, which resumes from the checkpoints on the PVC.
  Str(e, "cleanPodPolicy", "Running");
  Int(e, "backoffLimit", 3);
  e << YAML::EndMap;
  e << YAML::Key << "mpiReplicaSpecs" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "Launcher" << YAML::Value << YAML::BeginMap;
  Int(e, "replicas", 1);
  Str(e, "restartPolicy", "OnFailure");
  PodTemplate(e, c, n, false);
  e << YAML::EndMap;
  e << YAML::Key << "Worker" << YAML::Value << YAML::BeginMap;
  Int(e, "replicas", c.world.nodes);
  Str(e, "restartPolicy", "OnFailure");
  PodTemplate(e, c, n, true);
  e << YAML::EndMap;
  e << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  return e.c_str();
}

// Local rank l serves on port_base + l on every worker pod: one endpoint per local rank,
// scraped on each worker pod's IP. The target labels name the job and the run directory
// as RUN_DIR/prometheus-targets.json does (docs/metrics.md, "Discovery"); the series carry
// no label of those names, so no honorLabels is needed.
std::string PodMonitorDoc(const JobConfig& c, const Names& n) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  Header(e, "monitoring.coreos.com/v1", "PodMonitor");
  Metadata(e, n.podmonitor, c);
  e << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "selector" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "matchLabels" << YAML::Value << YAML::BeginMap;
  Str(e, kJobLabel, c.name);
  Str(e, kRoleLabel, "worker");
  e << YAML::EndMap << YAML::EndMap;
  e << YAML::Key << "namespaceSelector" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "matchNames" << YAML::Value << YAML::BeginSeq << YAML::DoubleQuoted
    << c.k8s.namespace_ << YAML::EndSeq << YAML::EndMap;
  e << YAML::Key << "podMetricsEndpoints" << YAML::Value << YAML::BeginSeq;
  // A program's rank serves twice: `ringpilot exec` its process on port_base + l, the
  // NCCL profiler plugin in it the NCCL series one block up (a pod's ports are its own, so
  // the blocks are where they start).
  const int ports = c.world.procs_per_node * (config::RunsCommand(c) ? 2 : 1);
  for (int local = 0; local < ports; ++local) {
    e << YAML::BeginMap;
    Str(e, "path", "/metrics");
    Str(e, "interval", "15s");
    if (!c.metrics.tls_cert_file.empty()) Str(e, "scheme", "https");
    e << YAML::Key << "relabelings" << YAML::Value << YAML::BeginSeq;
    e << YAML::BeginMap;
    Str(e, "action", "replace");
    e << YAML::Key << "sourceLabels" << YAML::Value << YAML::BeginSeq << "__meta_kubernetes_pod_ip"
      << YAML::EndSeq;
    Str(e, "regex", "(.+)");
    Str(e, "replacement", "$1:" + std::to_string(config::MetricsPort(c.metrics, local)));
    Str(e, "targetLabel", "__address__");
    e << YAML::EndMap;
    for (const char* label : {"ringpilot_job", "ringpilot_run"}) {
      // The run directory is kCheckpointDir/NAME: its last component is the job's name.
      e << YAML::BeginMap;
      Str(e, "action", "replace");
      Str(e, "replacement", c.name);
      Str(e, "targetLabel", label);
      e << YAML::EndMap;
    }
    e << YAML::EndSeq << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap << YAML::EndMap;
  return e.c_str();
}

void Check(bool ok, const std::string& key, const std::string& problem) {
  if (!ok) throw RenderError(key + ": " + problem);
}

}  // namespace

Names NamesFor(const std::string& job_name) {
  return Names{job_name, job_name + "-job", job_name + "-checkpoints", job_name,
               job_name + "-worker"};
}

std::vector<std::string> WorkerHosts(const JobConfig& config) {
  const Names n = NamesFor(config.name);
  std::vector<std::string> hosts;
  for (int i = 0; i < config.world.nodes; ++i) {
    hosts.push_back(n.mpijob + "-worker-" + std::to_string(i) + "." + n.worker_service + "." +
                    config.k8s.namespace_ + ".svc");
  }
  return hosts;
}

config::JobConfig PodJobConfig(const JobConfig& config) {
  JobConfig pod = config;
  pod.launch.backend = config::Backend::kMpi;
  pod.launch.hosts.clear();
  for (const std::string& h : WorkerHosts(config)) {
    pod.launch.hosts.push_back(config::HostSlots{h, config.world.procs_per_node});
  }
  pod.metrics.bind = config::ClusterMetricsBind(pod.metrics.bind);
  return pod;
}

WorkerResources WorkerResourcesFor(const JobConfig& c) {
  const double ranks = c.world.procs_per_node;
  // The rules checked the quantities; an unparsable one (a hand-built config) reads as 0
  // and fails RenderDocuments' checks first.
  const double cpu = config::QuantityValue(c.k8s.cpu_per_rank).value_or(0) * ranks;
  const double memory = config::QuantityValue(c.k8s.memory_per_rank).value_or(0) * ranks +
                        config::QuantityValue(c.k8s.shm_size).value_or(0);
  return WorkerResources{config::CpuQuantity(cpu), config::MemoryQuantity(memory),
                         config::RequestedGpusPerNode(c.world)};
}

std::vector<std::string> RenderDocuments(const JobConfig& c) {
  Check(config::IsDnsLabel(c.name), "name",
        "must be an RFC 1123 DNS label for Kubernetes (lowercase a-z, 0-9, '-'), got '" + c.name +
            "'");
  const std::string last_pod = c.name + "-worker-" + std::to_string(c.world.nodes - 1);
  Check(last_pod.size() <= 63, "name",
        "too long for Kubernetes: pod name '" + last_pod + "' exceeds 63 characters");
  Check(!c.k8s.image.empty(), "k8s.image", "required by 'ringpilot k8s render' (set k8s.image)");
  Check(config::IsImageReference(c.k8s.image), "k8s.image",
        "not an image reference: '" + c.k8s.image + "'");
  Check(config::IsDnsLabel(c.k8s.namespace_), "k8s.namespace", "must be a DNS label");
  Check(c.k8s.rdma_resource.empty() || config::IsResourceName(c.k8s.rdma_resource),
        "k8s.rdma_resource", "must be a resource name like rdma/ib");
  Check(config::IsPositiveQuantity(c.k8s.shm_size), "k8s.shm_size", "must be a positive quantity");
  Check(config::IsPositiveQuantity(c.k8s.checkpoint_size), "k8s.checkpoint_size",
        "must be a positive quantity");
  Check(c.k8s.storage_class.empty() || config::IsDnsSubdomain(c.k8s.storage_class),
        "k8s.storage_class", "must be a DNS subdomain");
  Check(c.k8s.run_as_user > 0, "k8s.run_as_user", "must be a non-root uid");
  Check(config::IsPositiveQuantity(c.k8s.cpu_per_rank), "k8s.cpu_per_rank",
        "must be a positive quantity");
  Check(config::IsPositiveQuantity(c.k8s.memory_per_rank), "k8s.memory_per_rank",
        "must be a positive quantity");

  std::vector<std::string> mounts;
  for (const std::string& text : c.k8s.volumes) {
    std::string problem;
    const std::optional<config::K8sVolume> v = config::ParseK8sVolume(text, &problem);
    Check(v.has_value(), "k8s.volumes", problem);
    for (const std::string& other : mounts) {
      Check(!config::PathUnder(v->mount, other) && !config::PathUnder(other, v->mount),
            "k8s.volumes", "mount paths " + other + " and " + v->mount + " overlap");
    }
    mounts.push_back(v->mount);
  }
  // Inside the pods the working directory is nobody's: a relative path reaches no data.
  for (const auto& [key, path] : DataPaths(c)) {
    Check(!path.empty() && path.front() == '/', key,
          "'" + path + "' is relative; in the pods it must be absolute, on a k8s.volumes mount " +
              "(e.g. k8s.volumes: [\"pvc:imagenet:/data\"] and " + key + ": /data/...)");
  }

  const Names n = NamesFor(c.name);
  std::vector<std::string> docs = {ConfigMapDoc(c, n), PvcDoc(c, n), MpiJobDoc(c, n)};
  if (c.metrics.enabled && c.metrics.port_base != 0) docs.push_back(PodMonitorDoc(c, n));
  return docs;
}

std::string RenderManifests(const JobConfig& config) {
  std::string out;
  for (const std::string& doc : RenderDocuments(config)) out += "---\n" + doc + "\n";
  return out;
}

}  // namespace ringpilot::k8s
