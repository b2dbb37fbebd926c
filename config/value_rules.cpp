#include "config/value_rules.h"

#include <cctype>
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

}  // namespace ringpilot::config
