// Private to the job config implementation (not installed, not for other components):
// the one table of job keys that drives parsing, `--set` overrides, EmitJobConfig and
// RenderConfigReference. The table and the value parsers live in config_schema.cpp; the
// message helpers (Origin::At, Fail, TypeName, Quote, Describe) in job_config.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/job.h"

namespace ringpilot::config::detail {

/// A position for messages: FILE:LINE:COL (1-based).
struct Where {
  std::string file;
  int line = 1;
  int col = 1;
};

/// Turns YAML marks of one parsed text into message positions. A job file maps marks
/// one to one; a `--set` value lives on line 1 of `--set[N]`, `col` columns in.
class Origin {
 public:
  static Origin File(std::string file) { return Origin(std::move(file), false, 1); }
  static Origin Override(std::string label, int value_col) {
    return Origin(std::move(label), true, value_col);
  }
  Where At(const YAML::Mark& mark) const;
  Where Start() const { return Where{file_, 1, is_override_ ? col_ : 1}; }

 private:
  Origin(std::string file, bool is_override, int col)
      : file_(std::move(file)), is_override_(is_override), col_(col) {}
  std::string file_;
  bool is_override_;
  int col_;
};

/// Throws ConfigError `FILE:LINE:COL: KEY: problem`.
[[noreturn]] void Fail(const Where& where, const std::string& key, const std::string& problem);

enum class ValueType { kInt, kFloat, kBool, kString, kEnum, kHostList, kStringList };
const char* TypeName(ValueType type);

/// A key's current value in the form EmitJobConfig writes it.
struct Value {
  bool is_list = false;
  bool quoted = false;  ///< strings are written double-quoted
  std::string scalar;
  std::vector<std::string> items;  ///< list items (always written double-quoted)
};

struct KeySpec {
  std::string path;     ///< "train.steps"; top-level keys have no dot
  std::string section;  ///< "train", or "" at top level
  std::string leaf;     ///< "steps"
  ValueType type = ValueType::kString;
  bool required = false;
  std::string allowed;      ///< range / allowed values, for the reference
  std::string default_doc;  ///< overrides the default shown in the reference
  std::string meaning;      ///< one line, for the reference
  /// Read only by the built-in trainer: a job with launch.command must not give it, and
  /// EmitJobConfig leaves it out of such a job.
  bool trainer_only = false;
  /// A list key EmitJobConfig writes only when it is not empty (an empty list is not a
  /// value the key accepts).
  bool omit_empty = false;
  /// Type- and range-checks `node` (never null: the caller rejects null) and stores it.
  std::function<void(const YAML::Node& node, const Origin& origin, JobConfig& config)> assign;
  std::function<Value(const JobConfig& config)> get;
};

/// Every job key, in reference order (top-level keys first, then section by section).
const std::vector<KeySpec>& Schema();
/// model.name's names, comma-separated, in the enum's order (for messages).
std::string ModelNameList();
/// Section names in reference order.
const std::vector<std::string>& Sections();
bool IsSection(const std::string& name);
/// The key `leaf` of `section` ("" = top level), or nullptr.
const KeySpec* FindKey(const std::string& section, const std::string& leaf);
/// Shortest text that parses back to exactly `v`.
std::string FormatDouble(double v);
/// `value` as a one-line, quoted, length-limited string for messages.
std::string Quote(const std::string& value);
/// "a mapping", "a sequence", "null", `"text"` or `text`, for type errors.
std::string Describe(const YAML::Node& node);

}  // namespace ringpilot::config::detail
