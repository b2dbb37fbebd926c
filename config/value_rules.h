// Kubernetes name and value rules for strings that reach rendered manifests. Header-only
// so that the job key table (launcher) checks `k8s:` keys with the very rules the renderer
// applies, without linking the k8s library (which depends on the launcher).
#pragma once

#include <cctype>
#include <string>

namespace ringpilot::k8s {

inline bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/// RFC 1123 DNS label: 1 to 63 of [a-z0-9-], starting and ending alphanumeric.
inline bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) {
    return false;
  }
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

/// RFC 1123 DNS subdomain: dot-separated DNS labels, at most 253 characters.
inline bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string::npos ? dot : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

/// Extended resource name `prefix/name` (e.g. `rdma/ib`, `nvidia.com/gpu`): prefix a DNS
/// subdomain, name 1 to 63 of [A-Za-z0-9._-] starting and ending alphanumeric.
inline bool IsResourceName(const std::string& s) {
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

/// A positive resource quantity: decimal number (`1`, `1.5`) with an optional suffix
/// Ki Mi Gi Ti Pi Ei, k M G T P E, or m; no sign, no exponent.
inline bool IsPositiveQuantity(const std::string& s) {
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

/// Container image reference: 1 to 255 of [A-Za-z0-9._/:@-], starting alphanumeric
/// (`registry.example.com:5000/team/ringpilot:1.0`, `repo@sha256:...`).
inline bool IsImageReference(const std::string& s) {
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

}  // namespace ringpilot::k8s
