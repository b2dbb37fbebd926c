#include "history/record_fields.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ringpilot::history {

using nlohmann::json;

json ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RecordError(path + ": cannot be read");
  std::ostringstream buf;
  buf << in.rdbuf();
  try {
    return json::parse(buf.str());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, ...": keep the position.
    const auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    throw RecordError(path + ": malformed JSON: " + what);
  }
}

RecordFields::RecordFields(const json& j, std::string file, std::string prefix)
    : j_(j), file_(std::move(file)), prefix_(std::move(prefix)) {
  if (!j_.is_object()) Fail("", "expected a JSON object");
}

void RecordFields::Fail(const std::string& key, const std::string& problem) const {
  std::string where = prefix_ + key;
  if (!where.empty() && where.back() == '.') where.pop_back();
  throw RecordError(file_ + ": " + (where.empty() ? "" : "'" + where + "': ") + problem);
}

bool RecordFields::Has(const std::string& key) const {
  return j_.contains(key) && !j_.at(key).is_null();
}

double RecordFields::Number(const std::string& key, double fallback) const {
  if (!Has(key)) return fallback;
  const json& v = j_.at(key);
  if (!v.is_number()) Fail(key, "expected a number, got " + v.dump());
  const double d = v.get<double>();
  if (!std::isfinite(d)) Fail(key, "not a finite number");
  return d;
}

int RecordFields::Int(const std::string& key, int fallback, int lo, int hi) const {
  if (!Has(key)) return fallback;
  const double d = Number(key);
  if (d != std::floor(d) || d < lo || d > hi) {
    Fail(key, "expected a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                  "], got " + j_.at(key).dump());
  }
  return static_cast<int>(d);
}

uint64_t RecordFields::Unsigned(const std::string& key) const {
  if (!Has(key)) return 0;
  const json& v = j_.at(key);
  if (v.is_number_unsigned()) return v.get<uint64_t>();  // exact, beyond 2^53 too
  const double d = Number(key);
  // 2^64: the first double past uint64_t.
  if (d != std::floor(d) || d < 0 || d >= 18446744073709551616.0) {
    Fail(key, "expected a whole number >= 0, got " + v.dump());
  }
  return static_cast<uint64_t>(d);
}

std::string RecordFields::String(const std::string& key) const {
  if (!Has(key)) return "";
  const json& v = j_.at(key);
  if (!v.is_string()) Fail(key, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

RecordFields RecordFields::Object(const std::string& key) const {
  static const json kEmpty = json::object();
  return RecordFields(Has(key) ? j_.at(key) : kEmpty, file_, prefix_ + key + ".");
}

std::map<std::string, double> RecordFields::NumberMap(const std::string& key) const {
  std::map<std::string, double> out;
  const RecordFields obj = Object(key);
  for (const auto& [name, value] : obj.j_.items()) out[name] = obj.Number(name);
  return out;
}

std::map<int, double> RecordFields::RankMap(const std::string& key) const {
  std::map<int, double> out;
  for (const auto& [name, value] : NumberMap(key)) {
    char* end = nullptr;
    const long r = std::strtol(name.c_str(), &end, 10);
    if (name.empty() || *end != '\0' || r < 0 || r > kMaxRecordRank) {
      Fail(key, "'" + name + "' is not a rank");
    }
    out[static_cast<int>(r)] = value;
  }
  return out;
}

RankHeader ReadRankHeader(const RecordFields& f, int file_rank) {
  RankHeader h;
  h.rank = f.Int("rank", file_rank, 0, kMaxRecordRank);
  if (h.rank != file_rank) {
    f.Fail("rank", "is " + std::to_string(h.rank) + " but the file name says rank " +
                       std::to_string(file_rank));
  }
  h.node = f.String("node");
  h.local_rank = f.Int("local_rank", -1, -1, kMaxRecordRank);
  return h;
}

}  // namespace ringpilot::history
