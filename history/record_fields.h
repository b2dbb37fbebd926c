// Reading a run directory's JSON records (logs/rank-N.nccl.json, logs/rank-N.stats.json,
// launcher.json, ...) with errors that name the file and the key on one line: what `ringpilot
// diagnose` prints when a record cannot be read, and what the launcher skips a record for.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace ringpilot::history {

/// A record that cannot be read or is malformed. The message names the file (and the key,
/// when one is wrong) and fits on one line.
class RecordError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The highest rank a record may name.
inline constexpr int kMaxRecordRank = 9999999;

/// The JSON document in `path`. Throws RecordError: "PATH: cannot be read", or "PATH:
/// malformed JSON: <where>".
nlohmann::json ReadJsonFile(const std::string& path);

/// Field readers over one JSON object of a record. A missing or null key gives the fallback;
/// a value of the wrong type throws RecordError naming `file` and the key (`prefix` + key,
/// as "communicators[0].comm"). Holds a reference to `j`: it must outlive the reader.
class RecordFields {
 public:
  /// Throws RecordError unless `j` is an object.
  RecordFields(const nlohmann::json& j, std::string file, std::string prefix = "");

  /// Throws RecordError "FILE: 'PREFIX+KEY': PROBLEM" (no key part when both are empty).
  [[noreturn]] void Fail(const std::string& key, const std::string& problem) const;
  /// Present and not null.
  bool Has(const std::string& key) const;
  /// A finite number.
  double Number(const std::string& key, double fallback = 0) const;
  /// A whole number in [lo, hi] (ranks, sizes).
  int Int(const std::string& key, int fallback, int lo, int hi) const;
  /// A whole number >= 0 that fits 64 bits (counts, sequence numbers).
  uint64_t Unsigned(const std::string& key) const;
  /// A string; "" when missing.
  std::string String(const std::string& key) const;
  /// The object under `key` (an empty one when missing), its keys prefixed "KEY.".
  RecordFields Object(const std::string& key) const;
  /// {"name": number, ...}
  std::map<std::string, double> NumberMap(const std::string& key) const;
  /// {"<rank>": number, ...}
  std::map<int, double> RankMap(const std::string& key) const;

  const nlohmann::json& raw() const { return j_; }
  const std::string& file() const { return file_; }

 private:
  const nlohmann::json& j_;
  std::string file_;
  std::string prefix_;
};

/// What every per-rank record says of its rank first: "rank", "node", "local_rank"
/// (logs/rank-N.nccl.json, logs/rank-N.stats.json).
struct RankHeader {
  int rank = 0;
  std::string node;
  int local_rank = -1;  ///< -1 unknown
};

/// The header of the record `f` reads, the file of rank `file_rank`: a missing "rank" is
/// file_rank, another one throws RecordError ("'rank': is R but the file name says rank N").
RankHeader ReadRankHeader(const RecordFields& f, int file_rank);

}  // namespace ringpilot::history
