// Rules for job values that reach Slurm scripts and Kubernetes manifests. The job key
// table (config/schema.cpp) checks `slurm:` and `k8s:` keys with them, and the renderers
// (slurm/, k8s/) apply the very same rules.
#pragma once

#include <optional>
#include <string>

#include "config/job.h"

namespace ringpilot::config {

/// "" when `s` is a valid Slurm --time value (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
/// D-HH:MM:SS, or `UNLIMITED`), else a one-line problem.
std::string CheckSlurmTime(const std::string& s);
/// "" when `s` is a valid Slurm partition/account/qos/job name: 1 to 63 of [A-Za-z0-9._-].
std::string CheckSlurmName(const std::string& s);
/// "" when `s` is a path of [A-Za-z0-9._/+-] (1 to 1024 characters, not starting with
/// '-'): safe in `#SBATCH` lines, which sbatch does not parse as shell.
std::string CheckSlurmPath(const std::string& s);
/// "" when `s` is an extra sbatch directive for slurm.directives: `--option` or
/// `--option=value`, option 1 to 63 of [a-z0-9-] starting with a letter, value 1 to 256 of
/// [A-Za-z0-9._,:=/@%+*|&!^~[]-] (no quotes, spaces or shell characters: `#SBATCH` lines
/// are parsed by sbatch, not a shell). Options the script renders from job keys
/// (`--time` from slurm.time, `--nodes` from world.nodes, ...) are refused, naming the key.
std::string CheckSbatchDirective(const std::string& s);
/// "" when `s` is a slurm.setup line: 1 to 4096 characters, no control characters, no
/// trailing backslash (one shell line each; the script runs them as written).
std::string CheckSlurmSetupLine(const std::string& s);

/// The metrics bind address of ranks started by a scheduler (Slurm, Kubernetes), where
/// Prometheus scrapes them from another host: a loopback address (127.x, `localhost`)
/// becomes 0.0.0.0 (every interface of the node); any other address is kept.
std::string ClusterMetricsBind(const std::string& bind);
/// GPUs a scheduler render requests per node: one per rank (world.procs_per_node) for
/// world.device cuda and auto (on a cluster `auto` means the GPUs are wanted), 0 for cpu.
int RequestedGpusPerNode(const WorldConfig& world);

/// RFC 1123 DNS label: 1 to 63 of [a-z0-9-], starting and ending alphanumeric.
bool IsDnsLabel(const std::string& s);
/// RFC 1123 DNS subdomain: dot-separated DNS labels, at most 253 characters.
bool IsDnsSubdomain(const std::string& s);
/// Extended resource name `prefix/name` (e.g. `rdma/ib`, `nvidia.com/gpu`): prefix a DNS
/// subdomain, name 1 to 63 of [A-Za-z0-9._-] starting and ending alphanumeric.
bool IsResourceName(const std::string& s);
/// A positive resource quantity: decimal number (`1`, `1.5`) with an optional suffix
/// Ki Mi Gi Ti Pi Ei, k M G T P E, or m; no sign, no exponent.
bool IsPositiveQuantity(const std::string& s);
/// The value of a positive quantity (IsPositiveQuantity) in its base unit: bytes for
/// memory (`16Gi` -> 17179869184), cores for CPU (`500m` -> 0.5); nullopt otherwise.
std::optional<double> QuantityValue(const std::string& s);
/// `bytes` as a memory quantity in whole MiB, rounded up (`34359738368` -> "32768Mi").
std::string MemoryQuantity(double bytes);
/// `cores` as a CPU quantity: whole cores when exact ("16"), else millicores ("1500m").
std::string CpuQuantity(double cores);
/// One `k8s.volumes` entry: a volume of the worker pods mounted at `mount`.
struct K8sVolume {
  enum class Kind { kPvc, kHostPath, kNfs };
  Kind kind = Kind::kPvc;
  std::string source;  ///< the claim name, the host directory, or the NFS export path
  std::string server;  ///< NFS server (host name or IPv4 address); "" otherwise
  std::string mount;   ///< absolute path in the container
  bool read_only = false;
};
/// Parses `pvc:CLAIM:/MOUNT`, `hostPath:/DIR:/MOUNT` or `nfs:SERVER:/EXPORT:/MOUNT`, each
/// optionally followed by `:ro`. CLAIM is a DNS subdomain; DIR, EXPORT and MOUNT are
/// absolute paths of [A-Za-z0-9._/+-] without `..`; MOUNT is none of the pods' own mounts
/// (/etc/ringpilot, /checkpoints, /dev/shm) nor under them. nullopt with the problem in
/// `*problem` otherwise.
std::optional<K8sVolume> ParseK8sVolume(const std::string& text, std::string* problem);
/// "" when ParseK8sVolume takes `text`, else its problem.
std::string CheckK8sVolume(const std::string& text);
/// Whether `path` is `dir` or lies under it (both absolute, compared by components).
bool PathUnder(const std::string& path, const std::string& dir);

/// Container image reference: 1 to 255 of [A-Za-z0-9._/:@-], starting alphanumeric
/// (`registry.example.com:5000/team/ringpilot:1.0`, `repo@sha256:...`).
bool IsImageReference(const std::string& s);

}  // namespace ringpilot::config
