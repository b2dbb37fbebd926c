#include "metrics/scrape_targets.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "base/run_variables.h"

namespace ringpilot::metrics {

std::string ResolveBind(const std::string& bind, const base::Environment& env, bool multi_node) {
  if (bind != base::kMetricsBindAuto) return bind;
  const bool cluster = multi_node || !base::Lookup(env, "SLURM_JOB_ID", "").empty() ||
                       !base::Lookup(env, "KUBERNETES_SERVICE_HOST", "").empty();
  return cluster ? NodeAddress() : "127.0.0.1";
}

std::string NodeAddress() {
  const std::string host = base::HostName();
  if (host.empty()) return "0.0.0.0";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0 || result == nullptr) {
    return "0.0.0.0";
  }
  std::string address = "0.0.0.0";
  for (const addrinfo* a = result; a != nullptr; a = a->ai_next) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
    if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text));
    address = text;
    break;
  }
  freeaddrinfo(result);
  return address;
}

std::string TargetHost(const std::string& address) {
  if (address != "0.0.0.0") return address;
  const std::string node = NodeAddress();
  if (node != "0.0.0.0") return node;
  const std::string host = base::HostName();
  return host.empty() ? "127.0.0.1" : host;
}

std::string FileSdJson(const std::vector<TargetGroup>& groups) {
  std::string out = "[";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const nlohmann::json group = {{"targets", groups[i].targets}, {"labels", groups[i].labels}};
    out += (i == 0 ? "\n  " : ",\n  ") + group.dump();
  }
  return out + (groups.empty() ? "]\n" : "\n]\n");
}

}  // namespace ringpilot::metrics
