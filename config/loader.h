// Private to the job config implementation: the Loader that turns a job file and its
// `--set` overrides into a JobConfig (config/job.cpp), with its cross-key rules in
// config/cross_checks.cpp.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/job.h"
#include "config/schema.h"

namespace ringpilot::config::detail {

// One pass over the file and the overrides collects every problem: each key is checked on
// its own (a bad key keeps its default and is remembered), and the cross-key rules run on
// the keys that passed. Only problems that leave nothing to check (YAML syntax, a document
// that is not a mapping) stop the pass. The first kMaxListedProblems problems are listed,
// the rest only counted ("... and N more"): a file of a million bad keys gets 21 lines.
class Loader {
 public:
  static constexpr std::size_t kMaxListedProblems = 20;

  explicit Loader(const std::string& source) : root_{source, 1, 1} { config_.source = source; }

  void LoadText(const std::string& text);
  void ApplyOverride(size_t index, const std::string& text);
  void ApplyOverrideText(size_t index, const std::string& text);
  /// launch.backend is `backend` from now on (see LoadJobConfigFor).
  void ImplyBackend(Backend backend, const std::string& command);
  JobConfig Finish();

 private:
  struct Given {
    Where where;
    int ordinal = 0;
  };

  void ApplyMapping(const YAML::Node& map, const std::string& section, const Origin& origin);
  void ApplyValue(const KeySpec& spec, const YAML::Node* key, const YAML::Node& value,
                  const Origin& origin);
  [[noreturn]] void FailUnknown(const Where& where, const std::string& section,
                                const std::string& leaf);
  /// Records a cross-key problem at the latest given key of `keys`, else at the first
  /// key's section, else at the top of the document; the message names that key. Nothing
  /// is recorded when one of `keys` (or its section) was rejected: the rule would judge
  /// a default, not what the user wrote.
  void CrossFail(const std::vector<std::string>& keys, const std::string& problem);
  [[noreturn]] void CrossFailAt(const std::vector<std::string>& keys, const std::string& problem);
  void CrossCheck();
  /// Whether a problem found now is listed (else it is only counted).
  bool Listing() const;
  bool IsGiven(const std::string& path) const { return given_.count(path) != 0; }
  bool Rejected(const std::string& path) const;
  /// Runs `step`; a ConfigError it throws is recorded (and `key`, when not empty, marked
  /// rejected) instead of ending the pass.
  template <typename F>
  void Collect(const std::string& key, F&& step);

  JobConfig config_;
  Where root_;
  std::map<std::string, Given> given_;     // key path -> where its latest value is
  std::map<std::string, Where> sections_;  // section -> where its key is in the file
  std::vector<std::string> errors_;        // the problems listed, in the order found
  std::size_t unlisted_ = 0;               // ... and those found after them
  std::set<std::string> known_listed_;     // sections whose known keys a problem listed
  std::set<std::string> rejected_;         // key paths and sections with a problem
  int ordinal_ = 0;
};

template <typename F>
void Loader::Collect(const std::string& key, F&& step) {
  try {
    step();
  } catch (const ConfigError& e) {
    for (const std::string& line : e.lines()) {
      if (errors_.size() < kMaxListedProblems) {
        errors_.push_back(line);
      } else {
        ++unlisted_;
      }
    }
    if (!key.empty()) rejected_.insert(key);
  }
}

}  // namespace ringpilot::config::detail
