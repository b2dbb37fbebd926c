// Private to the job config implementation: the builders of the key table
// (config/schema.cpp). Each makes one KeySpec: its reference text, a parser that checks
// type and range and fails with `FILE:LINE:COL: KEY: problem`, and a getter for
// EmitJobConfig. Fields are reached through Field<T>, a reference into a JobConfig.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/job.h"
#include "config/schema.h"

namespace ringpilot::config::detail {

/// Most ranks one host may give (`launch.hosts` slots).
constexpr int kMaxSlots = 4096;

template <typename T>
using Field = std::function<T&(JobConfig&)>;

template <typename S, typename T>
Field<T> Member(S JobConfig::*section, T S::*field) {
  return [section, field](JobConfig& c) -> T& { return (c.*section).*field; };
}

template <typename T>
const T& Read(const Field<T>& field, const JobConfig& config) {
  return field(const_cast<JobConfig&>(config));  // read only
}

/// A KeySpec with its path split into section and leaf, and its reference text.
KeySpec Base(const std::string& path, ValueType type, std::string allowed, std::string meaning);

/// A plain (untagged, unquoted) scalar: the only kind numbers and booleans may be.
bool IsPlain(const YAML::Node& n);

/// Fails with "expected EXPECTED, got <what node is>" at `node`.
[[noreturn]] void TypeFail(const std::string& path, const YAML::Node& node, const Origin& origin,
                           const std::string& expected);

/// The text of a string-typed scalar; rejects collections and control characters.
std::string ReadString(const std::string& path, const YAML::Node& node, const Origin& origin);

/// [+-]digits.
bool IsDecimalInteger(const std::string& s);
/// YAML 1.2 core schema float, without .inf/.nan.
bool IsDecimalFloat(const std::string& s);

/// An integer in [lo, hi]; `extra` (optional) returns "" or a further problem.
template <typename T>
KeySpec IntKey(const std::string& path, Field<T> field, T lo, T hi, std::string meaning,
               std::string allowed = "", std::function<std::string(T)> extra = nullptr) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  KeySpec k = Base(path, ValueType::kInt, allowed.empty() ? range : allowed, std::move(meaning));
  k.assign = [path, field, lo, hi, range, extra](const YAML::Node& node, const Origin& origin,
                                                 JobConfig& c) {
    if (!IsPlain(node) || !IsDecimalInteger(node.Scalar())) {
      TypeFail(path, node, origin, "an integer");
    }
    const std::string& s = node.Scalar();
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    T v{};
    const auto r = std::from_chars(begin, s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || v < lo || v > hi) {
      Fail(origin.At(node.Mark()), path, "must be in " + range + ", got " + s);
    }
    if (extra) {
      const std::string problem = extra(v);
      if (!problem.empty()) Fail(origin.At(node.Mark()), path, problem);
    }
    field(c) = v;
  };
  k.get = [field](const JobConfig& c) {
    Value v;
    v.scalar = std::to_string(Read(field, c));
    return v;
  };
  return k;
}

/// A number in the range with open or closed ends.
KeySpec FloatKey(const std::string& path, Field<double> field, double lo, bool lo_open, double hi,
                 bool hi_open, std::string meaning);

KeySpec BoolKey(const std::string& path, Field<bool> field, std::string meaning);

/// `check` returns "" for a good value, else the problem.
KeySpec StringKey(const std::string& path, Field<std::string> field,
                  std::function<std::string(const std::string&)> check, std::string allowed,
                  std::string meaning);

/// `names` joined by `sep`, each between `quote`s.
std::string JoinNames(const std::vector<std::string>& names, const char* quote,
                      const char* sep = ", ");

/// T is an enum class indexed like `names`, or a std::string restricted to `names`.
template <typename T>
KeySpec EnumKey(const std::string& path, Field<T> field, const std::vector<std::string>& names,
                std::string meaning) {
  KeySpec k = Base(path, ValueType::kEnum, JoinNames(names, "`"), std::move(meaning));
  k.assign = [path, field, names](const YAML::Node& node, const Origin& origin, JobConfig& c) {
    if (!node.IsScalar()) TypeFail(path, node, origin, "one of " + JoinNames(names, ""));
    const auto it = std::find(names.begin(), names.end(), node.Scalar());
    if (it == names.end()) {
      Fail(origin.At(node.Mark()), path,
           "must be one of " + JoinNames(names, "") + ", got " + Quote(node.Scalar()));
    }
    if constexpr (std::is_enum_v<T>) {
      field(c) = static_cast<T>(it - names.begin());
    } else {
      field(c) = *it;
    }
  };
  k.get = [field, names](const JobConfig& c) {
    Value v;
    if constexpr (std::is_enum_v<T>) {
      v.scalar = names.at(static_cast<size_t>(Read(field, c)));
    } else {
      v.scalar = Read(field, c);
      v.quoted = v.scalar.empty();
    }
    return v;
  };
  return k;
}

/// "" for 1 to 63 of [A-Za-z0-9._-], else the problem.
std::string CheckName(const std::string& s);
/// 1 to 253 of [A-Za-z0-9.-].
bool IsHostChars(const std::string& s);
/// `s` cut at every `sep` (empty parts kept).
std::vector<std::string> Split(const std::string& s, char sep);
/// "" for `auto`, an IPv4 address or a host name, else the problem.
std::string CheckBind(const std::string& s);

/// `launch.hosts`: `host:slots` or {host, slots} entries, no host twice.
KeySpec HostsKey(const std::string& path, Field<std::vector<HostSlots>> field);

/// `check` (optional) returns "" for a good item, else the problem.
KeySpec StringListKey(const std::string& path, Field<std::vector<std::string>> field,
                      std::string meaning, std::string allowed = "list of strings",
                      std::function<std::string(const std::string&)> check = nullptr);

/// launch.command: argv of the user's program (non-empty; any scalar taken as its text).
KeySpec CommandKey(const std::string& path, Field<std::vector<std::string>> field,
                   std::string meaning);

}  // namespace ringpilot::config::detail
