#include "config/value_rules.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <vector>

namespace ringpilot::config {
namespace {

bool AllDigits(const std::string& s, size_t min_len, size_t max_len) {
  if (s.size() < min_len || s.size() > max_len) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::vector<std::string> SplitColons(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(':', start);
    parts.push_back(s.substr(start, pos == std::string::npos ? pos : pos - start));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

std::string CheckSlurmTime(const std::string& s) {
  const std::string problem =
      "must be MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED, got '" + s + "'";
  if (s == "UNLIMITED") return "";
  std::string rest = s;
  bool has_days = false;
  const size_t dash = s.find('-');
  if (dash != std::string::npos) {
    if (!AllDigits(s.substr(0, dash), 1, 4)) return problem;
    has_days = true;
    rest = s.substr(dash + 1);
  }
  const std::vector<std::string> parts = SplitColons(rest);
  if (parts.size() > 3) return problem;
  for (const auto& p : parts) {
    if (!AllDigits(p, 1, has_days || parts.size() > 1 ? 2 : 7)) return problem;
  }
  bool positive = has_days && std::stoi(s.substr(0, dash)) > 0;
  for (const auto& p : parts) positive = positive || std::stoi(p) > 0;
  if (!positive) return "must be longer than zero, got '" + s + "'";
  return "";
}

std::string CheckSlurmName(const std::string& s) {
  bool ok = !s.empty() && s.size() <= 63;
  for (char c : s) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  return ok ? "" : "must be 1 to 63 of [A-Za-z0-9._-], got '" + s + "'";
}

std::string CheckSlurmPath(const std::string& s) {
  bool ok = !s.empty() && s.size() <= 1024 && s.front() != '-';
  for (char c : s) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) ||
                std::string("._/+-").find(c) != std::string::npos);
  }
  return ok ? "" : "must be a path of [A-Za-z0-9._/+-] not starting with '-', got '" + s + "'";
}

std::string CheckSbatchDirective(const std::string& s) {
  const std::string shape =
      "must be --option or --option=value (option of [a-z0-9-], value of "
      "[A-Za-z0-9._,:=/@%+*|&!^~[]-], no spaces or quotes), got '" +
      s + "'";
  if (s.size() < 3 || s.compare(0, 2, "--") != 0) return shape;
  const size_t eq = s.find('=');
  const std::string option = s.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  bool ok = !option.empty() && option.size() <= 63 && option[0] >= 'a' && option[0] <= 'z';
  for (char c : option) ok = ok && (IsLowerAlnum(c) || c == '-');
  if (eq != std::string::npos) {
    const std::string value = s.substr(eq + 1);
    ok = ok && !value.empty() && value.size() <= 256;
    for (char c : value) {
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) ||
                  std::string("._,:=/@%+*|&!^~[]-").find(c) != std::string::npos);
    }
  }
  if (!ok) return shape;
  // What the script already says, and the job key that says it.
  static const std::pair<const char*, const char*> kRendered[] = {
      {"job-name", "name"},
      {"nodes", "world.nodes"},
      {"ntasks", "world.nodes x world.procs_per_node"},
      {"ntasks-per-node", "world.procs_per_node"},
      {"gpus-per-node", "world.device and world.procs_per_node"},
      {"gpus", "world.device and world.procs_per_node"},
      {"gpus-per-task", "world.device (a GPU cgroup per task hides NVLink peers)"},
      {"time", "slurm.time"},
      {"partition", "slurm.partition"},
      {"account", "slurm.account"},
      {"qos", "slurm.qos"},
      {"signal", "slurm.signal_seconds"},
      {"output", "slurm.run_root"},
      {"error", "slurm.run_root"},
      {"open-mode", "slurm.run_root"},
      {"requeue", "the preemption protocol"},
      {"no-requeue", "the preemption protocol"},
      {"array", "nothing: one job, one run directory"},
  };
  for (const auto& [name, key] : kRendered) {
    if (option == name) {
      return "--" + option + " is rendered from " + key + "; set that instead, got '" + s + "'";
    }
  }
  return "";
}

std::string CheckSlurmSetupLine(const std::string& s) {
  // A trailing backslash would join the line with the script's next one.
  bool ok = !s.empty() && s.size() <= 4096 && s.back() != '\\';
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    ok = ok && u >= 0x20 && u != 0x7f;
  }
  return ok ? ""
            : "must be one shell line of 1 to 4096 characters without control characters or a "
              "trailing backslash";
}

std::string ClusterMetricsBind(const std::string& bind) {
  return bind == "localhost" || bind.rfind("127.", 0) == 0 ? "0.0.0.0" : bind;
}

int RequestedGpusPerNode(const WorldConfig& world) {
  switch (world.device) {
    case Device::kCuda:
    case Device::kAuto:
      return world.procs_per_node;
    case Device::kCpu:
      return 0;
  }
  return 0;
}

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) {
    return false;
  }
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string::npos ? dot : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

bool IsResourceName(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || !IsDnsSubdomain(s.substr(0, slash))) return false;
  const std::string name = s.substr(slash + 1);
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  for (char c : name) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool IsPositiveQuantity(const std::string& s) {
  size_t i = 0;
  size_t digits = 0;
  bool nonzero = false;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    nonzero = nonzero || s[i] != '0';
    ++i, ++digits;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      nonzero = nonzero || s[i] != '0';
      ++i, ++digits;
    }
  }
  if (digits == 0 || digits > 18 || !nonzero) return false;
  const std::string suffix = s.substr(i);
  for (const char* ok :
       {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E", "m"}) {
    if (suffix == ok) return true;
  }
  return false;
}

std::optional<double> QuantityValue(const std::string& s) {
  if (!IsPositiveQuantity(s)) return std::nullopt;
  size_t digits = 0;
  while (digits < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.')) {
    ++digits;
  }
  const double number = std::stod(s.substr(0, digits));
  const std::string suffix = s.substr(digits);
  static const std::pair<const char*, double> kScale[] = {{"", 1},
                                                          {"m", 1e-3},
                                                          {"k", 1e3},
                                                          {"M", 1e6},
                                                          {"G", 1e9},
                                                          {"T", 1e12},
                                                          {"P", 1e15},
                                                          {"E", 1e18},
                                                          {"Ki", 1024.0},
                                                          {"Mi", 1048576.0},
                                                          {"Gi", 1073741824.0},
                                                          {"Ti", 1099511627776.0},
                                                          {"Pi", 1125899906842624.0},
                                                          {"Ei", 1152921504606846976.0}};
  for (const auto& [name, scale] : kScale) {
    if (suffix == name) return number * scale;
  }
  return std::nullopt;
}

std::string MemoryQuantity(double bytes) {
  const double mib = std::ceil(bytes / 1048576.0);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0fMi", mib);
  return buf;
}

std::string CpuQuantity(double cores) {
  const double milli = std::ceil(cores * 1000 - 1e-6);
  char buf[48];
  if (std::fmod(milli, 1000) == 0) {
    std::snprintf(buf, sizeof buf, "%.0f", milli / 1000);
  } else {
    std::snprintf(buf, sizeof buf, "%.0fm", milli);
  }
  return buf;
}

bool IsImageReference(const std::string& s) {
  if (s.empty() || s.size() > 255 || !std::isalnum(static_cast<unsigned char>(s.front()))) {
    return false;
  }
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string("._/:@-").find(c) == std::string::npos) {
      return false;
    }
  }
  return true;
}

namespace {

// An absolute path of safe characters without `..` components, or the problem.
std::string CheckAbsolutePath(const std::string& what, const std::string& path) {
  if (path.empty() || path.front() != '/')
    return what + " must be an absolute path, got '" + path + "'";
  if (path.size() > 1024) return what + " is longer than 1024 characters";
  for (char c : path) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string("._/+-").find(c) == std::string::npos) {
      return what + " '" + path + "' has a character outside [A-Za-z0-9._/+-]";
    }
  }
  if (("/" + path + "/").find("/../") != std::string::npos) {
    return what + " '" + path + "' has a '..' component";
  }
  return "";
}

}  // namespace

bool PathUnder(const std::string& path, const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (d == "/") return !path.empty() && path.front() == '/';
  return path == d ||
         (path.size() > d.size() && path.compare(0, d.size(), d) == 0 && path[d.size()] == '/');
}

std::optional<K8sVolume> ParseK8sVolume(const std::string& text, std::string* problem) {
  const auto fail = [problem](const std::string& why) -> std::optional<K8sVolume> {
    *problem = why;
    return std::nullopt;
  };
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string::npos ? colon : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  K8sVolume v;
  if (!parts.empty() && parts.back() == "ro") {
    v.read_only = true;
    parts.pop_back();
  }
  const std::string forms = "pvc:CLAIM:/MOUNT, hostPath:/DIR:/MOUNT or nfs:SERVER:/EXPORT:/MOUNT";
  if (parts.empty() || parts.size() < 3) return fail("expected " + forms + ", got '" + text + "'");
  const std::string& kind = parts[0];
  std::string check;
  if (kind == "pvc" && parts.size() == 3) {
    v.kind = K8sVolume::Kind::kPvc;
    v.source = parts[1];
    if (!IsDnsSubdomain(v.source)) {
      return fail("claim '" + v.source + "' is not a DNS subdomain (lowercase a-z, 0-9, '-', '.')");
    }
  } else if (kind == "hostPath" && parts.size() == 3) {
    v.kind = K8sVolume::Kind::kHostPath;
    v.source = parts[1];
    check = CheckAbsolutePath("the host directory", v.source);
  } else if (kind == "nfs" && parts.size() == 4) {
    v.kind = K8sVolume::Kind::kNfs;
    v.server = parts[1];
    v.source = parts[2];
    bool host_ok = !v.server.empty() && v.server.size() <= 253;
    for (char c : v.server) {
      host_ok = host_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-');
    }
    if (!host_ok) return fail("NFS server '" + v.server + "' is not a host name or IPv4 address");
    check = CheckAbsolutePath("the NFS export", v.source);
  } else {
    return fail("expected " + forms + " (optionally ending :ro), got '" + text + "'");
  }
  if (!check.empty()) return fail(check);
  v.mount = parts.back();
  check = CheckAbsolutePath("the mount path", v.mount);
  if (!check.empty()) return fail(check);
  if (v.mount == "/") return fail("the mount path may not be /");
  for (const char* own : {"/etc/ringpilot", "/checkpoints", "/dev/shm"}) {
    if (PathUnder(v.mount, own) || PathUnder(own, v.mount)) {
      return fail("the mount path " + v.mount + " clashes with the pods' own mount " + own);
    }
  }
  return v;
}

std::string CheckK8sVolume(const std::string& text) {
  std::string problem;
  return ParseK8sVolume(text, &problem) ? std::string() : problem;
}

}  // namespace ringpilot::config
