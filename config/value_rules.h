// Rules for job values that reach Slurm scripts and Kubernetes manifests. The job key
// table (config/schema.cpp) checks `slurm:` and `k8s:` keys with them, and the renderers
// (slurm/, k8s/) apply the very same rules.
#pragma once

#include <string>

namespace ringpilot::config {

/// "" when `s` is a valid Slurm --time value (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
/// D-HH:MM:SS, or `UNLIMITED`), else a one-line problem.
std::string CheckSlurmTime(const std::string& s);
/// "" when `s` is a valid Slurm partition/account/qos/job name: 1 to 63 of [A-Za-z0-9._-].
std::string CheckSlurmName(const std::string& s);
/// "" when `s` is a path of [A-Za-z0-9._/+-] (1 to 1024 characters, not starting with
/// '-'): safe in `#SBATCH` lines, which sbatch does not parse as shell.
std::string CheckSlurmPath(const std::string& s);

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
/// Container image reference: 1 to 255 of [A-Za-z0-9._/:@-], starting alphanumeric
/// (`registry.example.com:5000/team/ringpilot:1.0`, `repo@sha256:...`).
bool IsImageReference(const std::string& s);

}  // namespace ringpilot::config
