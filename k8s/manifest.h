// `ringpilot k8s render`: the Kubernetes objects that run one job as a Kubeflow MPIJob.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "config/job.h"

namespace ringpilot::k8s {

/// Paths inside the image and the pods (k8s/Dockerfile builds the image to match).
inline constexpr const char* kRingpilotPath = "/opt/ringpilot/bin/ringpilot";
inline constexpr const char* kJobDir = "/etc/ringpilot";       ///< ConfigMap mount (job.yaml)
inline constexpr const char* kCheckpointDir = "/checkpoints";  ///< PVC mount
inline constexpr const char* kHome = "/home/ringpilot";        ///< image user's home (ssh keys)
inline constexpr int kSshPort = 2222;  ///< sshd of a non-root worker (k8s/Dockerfile)

/// A job that cannot be rendered: one line naming the key and the problem.
class RenderError : public std::invalid_argument {
 public:
  explicit RenderError(const std::string& line) : std::invalid_argument(line) {}
};

/// Object names, derived from the job name (an RFC 1123 DNS label).
struct Names {
  std::string mpijob;          ///< NAME (pods: NAME-launcher, NAME-worker-I)
  std::string configmap;       ///< NAME-job
  std::string pvc;             ///< NAME-checkpoints
  std::string podmonitor;      ///< NAME
  std::string worker_service;  ///< NAME-worker: headless Service the MPI operator creates
};
Names NamesFor(const std::string& job_name);

/// Worker host names as the MPI operator's hostfile spells them:
/// NAME-worker-I.NAME-worker.NAMESPACE.svc, I = 0..nodes-1.
std::vector<std::string> WorkerHosts(const config::JobConfig& config);

/// The job file the launcher pod runs (ConfigMap content): `config` with launch.backend
/// mpi, launch.hosts = WorkerHosts (procs_per_node slots each), and metrics.bind as
/// config::ClusterMetricsBind makes it (Prometheus scrapes pod IPs).
config::JobConfig PodJobConfig(const config::JobConfig& config);

/// The launcher pod's CPU and memory request (and memory limit): it runs `ringpilot run`
/// and mpirun, not the ranks.
inline constexpr const char* kLauncherCpu = "500m";
inline constexpr const char* kLauncherMemory = "1Gi";

/// A worker pod's resources, requests equal to limits: CPU k8s.cpu_per_rank x
/// world.procs_per_node; memory k8s.memory_per_rank x world.procs_per_node + k8s.shm_size
/// (the /dev/shm emptyDir is memory the pod is charged for); `nvidia.com/gpu` from
/// config::RequestedGpusPerNode (world.device cuda and auto: one per rank; 0 for cpu).
struct WorkerResources {
  std::string cpu;     ///< "16", "1500m"
  std::string memory;  ///< whole MiB, "81920Mi"
  int gpus = 0;
};
WorkerResources WorkerResourcesFor(const config::JobConfig& config);

/// The manifests, one YAML document each: ConfigMap, PersistentVolumeClaim, MPIJob
/// (kubeflow.org/v2beta1) and, when metrics are enabled, a PodMonitor
/// (monitoring.coreos.com/v1). Throws RenderError when k8s.image is empty, the job name
/// is not a DNS label short enough for the pod names (NAME-worker-I, at most 63), or a
/// `k8s:` value breaks its rule (config/value_rules.h).
std::vector<std::string> RenderDocuments(const config::JobConfig& config);

/// RenderDocuments joined into one multi-document YAML stream (`---` before each).
std::string RenderManifests(const config::JobConfig& config);

}  // namespace ringpilot::k8s
