// The builders of the job key table (key_builders.h): one per value type, each making the
// KeySpec's parser (type and range checks with FILE:LINE:COL messages) and its getter.
#include "config/key_builders.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "base/run_variables.h"

namespace ringpilot::config::detail {
namespace {

std::string ControlCharProblem(const std::string& s) {
  for (unsigned char ch : s) {
    if (ch < 0x20 || ch == 0x7f) return "must not contain control characters, got " + Quote(s);
  }
  return "";
}

int ParseSlots(const std::string& s) {  // -1 if not 1..kMaxSlots
  if (s.empty() || s.size() > 4 || !std::all_of(s.begin(), s.end(), [](char ch) {
        return std::isdigit(static_cast<unsigned char>(ch));
      })) {
    return -1;
  }
  const int v = std::stoi(s);
  return v >= 1 && v <= kMaxSlots ? v : -1;
}

HostSlots ReadHost(const std::string& path, const YAML::Node& item, const Origin& origin) {
  const std::string host_rule = "host must be 1 to 253 of [A-Za-z0-9.-]";
  const std::string slots_rule = "slots must be an integer in 1.." + std::to_string(kMaxSlots);
  HostSlots hs;
  if (item.IsScalar()) {
    const std::string& s = item.Scalar();
    const auto colon = s.rfind(':');
    hs.host = s.substr(0, colon);
    if (!IsHostChars(hs.host)) {
      Fail(origin.At(item.Mark()), path, "entry " + Quote(s) + ": " + host_rule);
    }
    if (colon != std::string::npos) {
      hs.slots = ParseSlots(s.substr(colon + 1));
      if (hs.slots < 0) Fail(origin.At(item.Mark()), path, "entry " + Quote(s) + ": " + slots_rule);
    }
    return hs;
  }
  if (!item.IsMap()) {
    Fail(origin.At(item.Mark()), path,
         "entry must be \"host:slots\" or {host: H, slots: N}, got " + Describe(item));
  }
  std::set<std::string> seen;
  for (const auto& kv : item) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    const YAML::Node& v = kv.second;
    if (!seen.insert(key).second) Fail(origin.At(kv.first.Mark()), path, "duplicate key " + key);
    if (key == "host") {
      if (!v.IsScalar() || !IsHostChars(v.Scalar())) {
        Fail(origin.At(v.Mark()), path, host_rule + ", got " + Describe(v));
      }
      hs.host = v.Scalar();
    } else if (key == "slots") {
      hs.slots = IsPlain(v) ? ParseSlots(v.Scalar()) : -1;
      if (hs.slots < 0) Fail(origin.At(v.Mark()), path, slots_rule + ", got " + Describe(v));
    } else {
      Fail(origin.At(kv.first.Mark()), path,
           "unknown key " + Quote(key) + " in host entry (known: host, slots)");
    }
  }
  if (hs.host.empty()) Fail(origin.At(item.Mark()), path, "host entry without host");
  return hs;
}

}  // namespace

KeySpec Base(const std::string& path, ValueType type, std::string allowed, std::string meaning) {
  KeySpec k;
  k.path = path;
  const auto dot = path.find('.');
  if (dot != std::string::npos) {
    k.section = path.substr(0, dot);
    k.leaf = path.substr(dot + 1);
  } else {
    k.leaf = path;
  }
  k.type = type;
  k.allowed = std::move(allowed);
  k.meaning = std::move(meaning);
  return k;
}

bool IsPlain(const YAML::Node& n) { return n.IsScalar() && n.Tag() == "?"; }

[[noreturn]] void TypeFail(const std::string& path, const YAML::Node& node, const Origin& origin,
                           const std::string& expected) {
  Fail(origin.At(node.Mark()), path, "expected " + expected + ", got " + Describe(node));
}

/// The text of a string-typed scalar; rejects collections and control characters.
std::string ReadString(const std::string& path, const YAML::Node& node, const Origin& origin) {
  if (!node.IsScalar()) TypeFail(path, node, origin, "a string");
  const std::string problem = ControlCharProblem(node.Scalar());
  if (!problem.empty()) Fail(origin.At(node.Mark()), path, problem);
  return node.Scalar();
}

bool IsDecimalInteger(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// YAML 1.2 core schema float, without .inf/.nan.
bool IsDecimalFloat(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  size_t digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

KeySpec FloatKey(const std::string& path, Field<double> field, double lo, bool lo_open, double hi,
                 bool hi_open, std::string meaning) {
  const std::string range = std::string(lo_open ? "(" : "[") + FormatDouble(lo) + ", " +
                            FormatDouble(hi) + (hi_open ? ")" : "]");
  KeySpec k = Base(path, ValueType::kFloat, range, std::move(meaning));
  k.assign = [=](const YAML::Node& node, const Origin& origin, JobConfig& c) {
    if (!IsPlain(node) || !IsDecimalFloat(node.Scalar())) TypeFail(path, node, origin, "a number");
    const std::string& s = node.Scalar();
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    double v = 0;
    const auto r = std::from_chars(begin, s.data() + s.size(), v);
    const bool in_range = r.ec == std::errc() && r.ptr == s.data() + s.size() &&
                          (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (!in_range) Fail(origin.At(node.Mark()), path, "must be in " + range + ", got " + s);
    field(c) = v;
  };
  k.get = [field](const JobConfig& c) {
    Value v;
    v.scalar = FormatDouble(Read(field, c));
    return v;
  };
  return k;
}

KeySpec BoolKey(const std::string& path, Field<bool> field, std::string meaning) {
  KeySpec k = Base(path, ValueType::kBool, "`true`, `false`", std::move(meaning));
  k.assign = [path, field](const YAML::Node& node, const Origin& origin, JobConfig& c) {
    if (IsPlain(node) && node.Scalar() == "true") {
      field(c) = true;
    } else if (IsPlain(node) && node.Scalar() == "false") {
      field(c) = false;
    } else {
      TypeFail(path, node, origin, "true or false");
    }
  };
  k.get = [field](const JobConfig& c) {
    Value v;
    v.scalar = Read(field, c) ? "true" : "false";
    return v;
  };
  return k;
}

KeySpec StringKey(const std::string& path, Field<std::string> field,
                  std::function<std::string(const std::string&)> check, std::string allowed,
                  std::string meaning) {
  KeySpec k = Base(path, ValueType::kString, std::move(allowed), std::move(meaning));
  k.assign = [path, field, check](const YAML::Node& node, const Origin& origin, JobConfig& c) {
    std::string s = ReadString(path, node, origin);
    const std::string problem = check(s);
    if (!problem.empty()) Fail(origin.At(node.Mark()), path, problem);
    field(c) = std::move(s);
  };
  k.get = [field](const JobConfig& c) {
    Value v;
    v.quoted = true;
    v.scalar = Read(field, c);
    return v;
  };
  return k;
}

std::string JoinNames(const std::vector<std::string>& names, const char* quote, const char* sep) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : sep) + (quote + n + quote);
  return out;
}

std::string CheckName(const std::string& s) {
  const bool ok = !s.empty() && s.size() <= 63 && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
  if (ok) return "";
  return "must be 1 to 63 of [A-Za-z0-9._-], got " + Quote(s);
}

bool IsHostChars(const std::string& s) {
  return !s.empty() && s.size() <= 253 && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-';
  });
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos - start));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

std::string CheckBind(const std::string& s) {
  const std::string problem = "must be auto, an IPv4 address or a host name, got " + Quote(s);
  if (s == base::kMetricsBindAuto) return "";
  if (!IsHostChars(s)) return problem;
  const auto parts = Split(s, '.');
  const bool numeric = std::all_of(s.begin(), s.end(), [](char ch) {
    return ch == '.' || std::isdigit(static_cast<unsigned char>(ch));
  });
  if (numeric) {
    if (parts.size() != 4) return problem;
    for (const auto& p : parts) {
      if (p.empty() || p.size() > 3 || std::stoi(p) > 255) return problem;
    }
    return "";
  }
  for (const auto& label : parts) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return problem;
    }
  }
  return "";
}

KeySpec HostsKey(const std::string& path, Field<std::vector<HostSlots>> field) {
  KeySpec k = Base(path, ValueType::kHostList,
                   "list of `host:slots` or `{host: H, slots: N}`; host 1 to 253 of "
                   "[A-Za-z0-9.-], slots 1.." +
                       std::to_string(kMaxSlots) + ", no host twice",
                   "hosts for backend `mpi`, one per node (`slots` ranks each)");
  k.assign = [path, field](const YAML::Node& node, const Origin& origin, JobConfig& c) {
    if (!node.IsSequence()) TypeFail(path, node, origin, "a list of host:slots entries");
    std::vector<HostSlots> hosts;
    for (const auto& item : node) {
      HostSlots hs = ReadHost(path, item, origin);
      for (const auto& prev : hosts) {
        if (prev.host == hs.host) {
          Fail(origin.At(item.Mark()), path, "host " + Quote(hs.host) + " is listed twice");
        }
      }
      hosts.push_back(std::move(hs));
    }
    field(c) = std::move(hosts);
  };
  k.get = [field](const JobConfig& c) {
    Value v;
    v.is_list = true;
    for (const auto& hs : Read(field, c))
      v.items.push_back(hs.host + ":" + std::to_string(hs.slots));
    return v;
  };
  return k;
}

/// `check` (optional) returns "" for a good item, else the problem.
KeySpec StringListKey(const std::string& path, Field<std::vector<std::string>> field,
                      std::string meaning, std::string allowed,
                      std::function<std::string(const std::string&)> check) {
  KeySpec k = Base(path, ValueType::kStringList, std::move(allowed), std::move(meaning));
  k.assign = [path, field, check](const YAML::Node& node, const Origin& origin, JobConfig& c) {
    if (!node.IsSequence()) TypeFail(path, node, origin, "a list of strings");
    std::vector<std::string> items;
    for (const auto& item : node) {
      items.push_back(ReadString(path, item, origin));
      const std::string problem = check ? check(items.back()) : std::string();
      if (!problem.empty()) Fail(origin.At(item.Mark()), path, problem);
    }
    field(c) = std::move(items);
  };
  k.get = [field](const JobConfig& c) {
    Value v;
    v.is_list = true;
    v.items = Read(field, c);
    return v;
  };
  return k;
}

// launch.command: argv of the user's program. Any scalar is taken as its text (yaml-cpp
// keeps `0.10` as written), so only what cannot be an argument is refused.
KeySpec CommandKey(const std::string& path, Field<std::vector<std::string>> field,
                   std::string meaning) {
  KeySpec k = Base(path, ValueType::kStringList,
                   "non-empty list of strings; the first names the program (PATH is searched "
                   "when it has no `/`)",
                   std::move(meaning));
  k.default_doc = "none (the built-in trainer)";
  k.omit_empty = true;
  k.assign = [path, field](const YAML::Node& node, const Origin& origin, JobConfig& c) {
    const std::string expected = "a list: the program and its arguments, e.g. [python3, train.py]";
    if (!node.IsSequence()) TypeFail(path, node, origin, expected);
    if (node.size() == 0) {
      Fail(origin.At(node.Mark()), path,
           "empty list; give the program and its arguments (e.g. [python3, train.py]), or leave "
           "the key out to train model.name with the built-in trainer");
    }
    std::vector<std::string> argv;
    for (const auto& item : node) {
      const std::string tag = item.IsScalar() ? item.Tag() : "";
      if (tag != "?" && tag != "!" && tag != "tag:yaml.org,2002:str") {
        TypeFail(path, item, origin, "a string (one argument of the program)");
      }
      argv.push_back(ReadString(path, item, origin));
      if (argv.size() == 1 && argv[0].empty()) {
        Fail(origin.At(item.Mark()), path, "the program (the first item) is an empty string");
      }
    }
    field(c) = std::move(argv);
  };
  k.get = [field](const JobConfig& c) {
    Value v;
    v.is_list = true;
    v.items = Read(field, c);
    return v;
  };
  return k;
}

}  // namespace ringpilot::config::detail
