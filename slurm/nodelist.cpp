#include "slurm/nodelist.h"

#include <cctype>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringpilot::slurm {
namespace {

// Numbers in host names and task counts stay far below this; the cap keeps range
// arithmetic free of overflow without a big-number type.
constexpr std::size_t kMaxDigits = 18;

[[noreturn]] void Fail(const char* what, const std::string& text, std::size_t pos,
                       const std::string& problem) {
  throw std::invalid_argument(std::string("invalid ") + what + " '" + text + "' at position " +
                              std::to_string(pos + 1) + ": " + problem);
}

// One bracket group, already expanded into its formatted numbers ("08", "09", "10").
using Group = std::vector<std::string>;

// A host pattern: literal text pieces interleaved with bracket groups,
// texts.size() == groups.size() + 1.
struct Pattern {
  std::vector<std::string> texts{std::string()};
  std::vector<Group> groups;
};

class NodelistParser {
 public:
  explicit NodelistParser(const std::string& list) : list_(list) {}

  std::vector<std::string> Parse() {
    if (list_.find_first_not_of(" \t\n") == std::string::npos) {
      Fail("Slurm node list", list_, 0, "the list is empty");
    }
    std::vector<std::string> hosts;
    while (true) {
      Pattern pattern = ParsePattern();
      Expand(pattern, 0, pattern.texts[0], &hosts);
      if (pos_ == list_.size()) break;
      ++pos_;  // the ',' that ended the pattern
    }
    return hosts;
  }

 private:
  [[noreturn]] void Error(std::size_t pos, const std::string& problem) const {
    Fail("Slurm node list", list_, pos, problem);
  }

  Pattern ParsePattern() {
    const std::size_t start = pos_;
    Pattern pattern;
    while (pos_ < list_.size() && list_[pos_] != ',') {
      const char c = list_[pos_];
      if (c == '[') {
        pattern.groups.push_back(ParseGroup());
        pattern.texts.emplace_back();
      } else if (c == ']') {
        Error(pos_, "']' without a matching '['");
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        Error(pos_, "white space inside a host name");
      } else {
        pattern.texts.back() += c;
        ++pos_;
      }
    }
    if (pos_ == start) Error(start, "empty host name");
    return pattern;
  }

  // Parses `[item,item,...]` starting at '['; leaves pos_ after the ']'.
  Group ParseGroup() {
    const std::size_t open = pos_++;
    Group group;
    while (true) {
      if (pos_ >= list_.size()) Error(open, "'[' is never closed");
      if (list_[pos_] == ']') Error(pos_, "empty item in brackets");
      const std::size_t lo_pos = pos_;
      const std::string lo = ParseNumber();
      std::string hi = lo;
      std::size_t hi_pos = lo_pos;
      if (pos_ < list_.size() && list_[pos_] == '-') {
        ++pos_;
        hi_pos = pos_;
        hi = ParseNumber();
      }
      const uint64_t lo_value = std::stoull(lo);
      const uint64_t hi_value = std::stoull(hi);
      if (hi_value < lo_value) {
        Error(hi_pos, "range " + lo + "-" + hi + " runs backwards");
      }
      if (hi_value - lo_value >= kMaxExpandedHosts) {
        Error(lo_pos, "range " + lo + "-" + hi + " is larger than " +
                          std::to_string(kMaxExpandedHosts) + " hosts");
      }
      // Slurm pads every number of a range to the width of its lower bound.
      for (uint64_t v = lo_value; v <= hi_value; ++v) {
        std::string digits = std::to_string(v);
        if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
        group.push_back(std::move(digits));
      }
      if (group.size() > kMaxExpandedHosts) Error(lo_pos, "too many hosts in brackets");
      if (pos_ >= list_.size()) Error(open, "'[' is never closed");
      if (list_[pos_] == ']') {
        ++pos_;
        return group;
      }
      if (list_[pos_] != ',') {
        Error(pos_, std::string("expected ',' or ']' in brackets, found '") + list_[pos_] + "'");
      }
      ++pos_;
    }
  }

  std::string ParseNumber() {
    const std::size_t start = pos_;
    while (pos_ < list_.size() && std::isdigit(static_cast<unsigned char>(list_[pos_]))) ++pos_;
    if (pos_ == start) {
      if (pos_ >= list_.size()) Error(pos_, "list ends inside brackets; expected a number");
      const char c = list_[pos_];
      Error(pos_, c == '[' ? std::string("nested '[' is not allowed")
                           : std::string("expected a number, found '") + c + "'");
    }
    if (pos_ - start > kMaxDigits) Error(start, "number has too many digits");
    return list_.substr(start, pos_ - start);
  }

  void Expand(const Pattern& pattern, std::size_t group, const std::string& prefix,
              std::vector<std::string>* hosts) const {
    if (group == pattern.groups.size()) {
      if (hosts->size() >= kMaxExpandedHosts) {
        Error(0, "expands to more than " + std::to_string(kMaxExpandedHosts) + " hosts");
      }
      hosts->push_back(prefix);
      return;
    }
    for (const std::string& number : pattern.groups[group]) {
      Expand(pattern, group + 1, prefix + number + pattern.texts[group + 1], hosts);
    }
  }

  const std::string& list_;
  std::size_t pos_ = 0;
};

int ParseCount(const std::string& spec, std::size_t* pos) {
  const std::size_t start = *pos;
  while (*pos < spec.size() && std::isdigit(static_cast<unsigned char>(spec[*pos]))) ++*pos;
  if (*pos == start) Fail("Slurm tasks-per-node value", spec, start, "expected a number");
  if (*pos - start > 9) Fail("Slurm tasks-per-node value", spec, start, "number is too large");
  const int value = std::stoi(spec.substr(start, *pos - start));
  if (value <= 0) Fail("Slurm tasks-per-node value", spec, start, "count must be positive");
  return value;
}

}  // namespace

std::vector<std::string> ExpandNodelist(const std::string& list) {
  return NodelistParser(list).Parse();
}

std::vector<int> ExpandTasksPerNode(const std::string& spec) {
  constexpr const char* kWhat = "Slurm tasks-per-node value";
  if (spec.empty()) Fail(kWhat, spec, 0, "the value is empty");
  std::vector<int> tasks;
  std::size_t pos = 0;
  while (true) {
    const int count = ParseCount(spec, &pos);
    int repeat = 1;
    if (pos < spec.size() && spec[pos] == '(') {
      if (pos + 1 >= spec.size() || spec[pos + 1] != 'x') {
        Fail(kWhat, spec, pos + 1, "expected 'x' after '('");
      }
      pos += 2;
      repeat = ParseCount(spec, &pos);
      if (pos >= spec.size() || spec[pos] != ')') Fail(kWhat, spec, pos, "expected ')'");
      ++pos;
    }
    if (tasks.size() + static_cast<std::size_t>(repeat) > kMaxExpandedHosts) {
      Fail(kWhat, spec, pos - 1, "describes too many nodes");
    }
    tasks.insert(tasks.end(), static_cast<std::size_t>(repeat), count);
    if (pos == spec.size()) return tasks;
    if (spec[pos] != ',') Fail(kWhat, spec, pos, std::string("unexpected '") + spec[pos] + "'");
    ++pos;
  }
}

}  // namespace ringpilot::slurm
