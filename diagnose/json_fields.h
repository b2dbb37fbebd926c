// Private to diagnose/: reading the JSON files of a run directory with errors that name the
// file and the key (DiagnoseError, one line).
#pragma once

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "diagnose/diagnose.h"

namespace ringpilot::diagnose::detail {

using nlohmann::json;

inline json ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DiagnoseError(path + ": cannot be read");
  std::ostringstream buf;
  buf << in.rdbuf();
  try {
    return json::parse(buf.str());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, ...": keep the position.
    const auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    throw DiagnoseError(path + ": malformed JSON: " + what);
  }
}

inline constexpr int kMaxRank = 9999999;

// Field readers that name the file and key in their error.
class Fields {
 public:
  Fields(const json& j, std::string file, std::string prefix = "")
      : j_(j), file_(std::move(file)), prefix_(std::move(prefix)) {
    if (!j_.is_object()) Fail("", "expected a JSON object");
  }
  [[noreturn]] void Fail(const std::string& key, const std::string& problem) const {
    std::string where = prefix_ + key;
    if (!where.empty() && where.back() == '.') where.pop_back();
    throw DiagnoseError(file_ + ": " + (where.empty() ? "" : "'" + where + "': ") + problem);
  }
  bool Has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  double Number(const std::string& key, double fallback = 0) const {
    if (!Has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number()) Fail(key, "expected a number, got " + v.dump());
    const double d = v.get<double>();
    if (!std::isfinite(d)) Fail(key, "not a finite number");
    return d;
  }
  // A whole number in [lo, hi] (ranks, sizes).
  int Int(const std::string& key, int fallback, int lo, int hi) const {
    if (!Has(key)) return fallback;
    const double d = Number(key);
    if (d != std::floor(d) || d < lo || d > hi) {
      Fail(key, "expected a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                    "], got " + j_.at(key).dump());
    }
    return static_cast<int>(d);
  }
  std::string String(const std::string& key) const {
    if (!Has(key)) return "";
    const json& v = j_.at(key);
    if (!v.is_string()) Fail(key, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
  Fields Object(const std::string& key) const {
    static const json kEmpty = json::object();
    return Fields(Has(key) ? j_.at(key) : kEmpty, file_, prefix_ + key + ".");
  }
  // {"name": number, ...}
  std::map<std::string, double> NumberMap(const std::string& key) const {
    std::map<std::string, double> out;
    const Fields obj = Object(key);
    for (const auto& [name, value] : obj.j_.items()) out[name] = obj.Number(name);
    return out;
  }
  // {"<rank>": number, ...}
  std::map<int, double> RankMap(const std::string& key) const {
    std::map<int, double> out;
    for (const auto& [name, value] : NumberMap(key)) {
      char* end = nullptr;
      const long r = std::strtol(name.c_str(), &end, 10);
      if (name.empty() || *end != '\0' || r < 0 || r > kMaxRank) {
        Fail(key, "'" + name + "' is not a rank");
      }
      out[static_cast<int>(r)] = value;
    }
    return out;
  }
  const json& raw() const { return j_; }
  const std::string& file() const { return file_; }

 private:
  const json& j_;
  std::string file_;
  std::string prefix_;
};

}  // namespace ringpilot::diagnose::detail
