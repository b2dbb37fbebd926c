// Where Prometheus finds the exporters: the address each one listens on (`metrics.bind`,
// "auto" included) and the file_sd file that lists them (docs/metrics.md, "Discovery").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/environment.h"

namespace ringpilot::metrics {

/// The address an exporter configured with `bind` listens on: `bind` itself, or for
/// base::kMetricsBindAuto the node's address (NodeAddress()) wherever Prometheus scrapes
/// from another host: a job on several nodes (`multi_node`), a Slurm job (SLURM_JOB_ID in
/// `env`) or a Kubernetes pod (KUBERNETES_SERVICE_HOST); 127.0.0.1 anywhere else.
std::string ResolveBind(const std::string& bind, const base::Environment& env,
                        bool multi_node = false);

/// The first IPv4 address this host's name resolves to that is not loopback (127/8);
/// "0.0.0.0" (every interface) when there is none, as on hosts whose /etc/hosts maps the
/// name to 127.0.1.1.
std::string NodeAddress();

/// The host part of a scrape target for an exporter listening on `address` (numeric
/// IPv4): `address` itself; for 0.0.0.0 the node's address, or its host name when it has
/// no other.
std::string TargetHost(const std::string& address);

/// One file_sd target group: `targets` ("host:port") with `labels` (target labels, and
/// `__scheme__` etc.).
struct TargetGroup {
  std::vector<std::string> targets;
  std::map<std::string, std::string> labels;
};

/// Prometheus file_sd JSON (`[{"targets": [...], "labels": {...}}, ...]`, one group per
/// line) of `groups`; "[]\n" for none.
std::string FileSdJson(const std::vector<TargetGroup>& groups);

}  // namespace ringpilot::metrics
