// Job file loading: YAML with marks -> schema checks -> `--set` overrides -> cross-key
// checks. Every key's type, range and meaning lives in the table in schema.cpp; the
// cross-key rules in cross_checks.cpp.
#include "config/job.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "base/run_variables.h"
#include "config/loader.h"
#include "config/schema.h"

namespace ringpilot::config {
namespace {

using detail::Describe;
using detail::Fail;
using detail::FindKey;
using detail::IsSection;
using detail::KeySpec;
using detail::Loader;
using detail::Origin;
using detail::Quote;
using detail::Schema;
using detail::Where;

constexpr const char* kDocumentKey = "<document>";

// Where the root node of each document of a YAML text is, for at most kMaxDocuments
// documents.
class DocumentRoots : public YAML::EventHandler {
 public:
  static constexpr int kMaxDocuments = 3;
  std::vector<YAML::Mark> roots;

  void OnDocumentStart(const YAML::Mark&) override { root_next_ = true; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnMapEnd() override {}

 private:
  void Node(const YAML::Mark& mark) {
    if (root_next_) roots.push_back(mark);
    root_next_ = false;
  }
  bool root_next_ = false;
};

/// The first YAML document of a text and where the root of each of its first few
/// documents is.
struct ParsedText {
  YAML::Node doc;
  std::vector<YAML::Mark> roots;
};

/// Parses `text` (a job file, or the value of an override). Not YAML::LoadAll: yaml-cpp 0.7
/// does not consume a ',' where a document's node should start (a file that begins with
/// ',', or `"x",`), so LoadAll returns empty documents for ever, growing without bound
/// (found by tests/fuzz/job_config_fuzzer). The first document is loaded; the others are
/// only counted, a few at most, and one that starts where the one before it did is that
/// stuck parser. Fails at `key` for a syntax error (its message after `prefix`), a nesting
/// deeper than yaml-cpp follows, and the stuck parser.
ParsedText ParseFirstDocument(const std::string& text, const Origin& origin, const std::string& key,
                              const std::string& prefix) {
  ParsedText parsed;
  DocumentRoots docs;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    while (static_cast<int>(docs.roots.size()) < DocumentRoots::kMaxDocuments &&
           parser.HandleNextDocument(docs)) {
    }
    parsed.doc = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for it is "bad file".
    Fail(origin.At(e.mark), key,
         prefix + "nested deeper than " + std::to_string(e.depth() - 1) + " levels");
  } catch (const YAML::Exception& e) {
    Fail(origin.At(e.mark), key, prefix + e.msg);
  }
  for (std::size_t i = 1; i < docs.roots.size(); ++i) {
    const YAML::Mark& at = docs.roots[i];
    if (at.pos == docs.roots[i - 1].pos && at.pos >= 0 &&
        static_cast<std::size_t>(at.pos) < text.size()) {
      Fail(origin.At(at), key,
           prefix + "unexpected " + Quote(std::string(1, text[static_cast<std::size_t>(at.pos)])) +
               " where a value should start");
    }
  }
  parsed.roots = std::move(docs.roots);
  return parsed;
}

/// A key path as printed in messages: itself when tame, else quoted.
std::string KeyText(const std::string& key) {
  for (unsigned char ch : key) {
    if (ch <= 0x20 || ch == 0x7f || ch == '"') return Quote(key);
  }
  return key.empty() ? Quote(key) : key;
}

std::string Position(const Where& w) {
  return std::to_string(w.line) + ":" + std::to_string(w.col);
}

// Optimal string alignment distance (adjacent transpositions count 1).
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

/// The closest known key to an unknown `section.leaf` (edit distance <= 2, or the same
/// leaf in another section), as a full path; "" if none.
std::string SuggestKey(const std::string& section, const std::string& leaf) {
  std::string best;
  size_t best_distance = 3;
  auto consider = [&](const std::string& candidate, const std::string& path) {
    const size_t d = EditDistance(leaf, candidate);
    if (d < best_distance && d < std::max(leaf.size(), candidate.size())) {
      best_distance = d;
      best = path;
    }
  };
  for (const auto& k : Schema()) {
    if (k.section == section) consider(k.leaf, k.path);
  }
  if (section.empty()) {
    for (const auto& name : detail::Sections()) consider(name, name);
  }
  if (!best.empty()) return best;
  for (const auto& k : Schema()) {
    if (k.leaf == leaf && k.section != section) return k.path;
  }
  return "";
}

/// Keys that were renamed: an old key is an error naming the new one (no silent alias,
/// so a job file never means two things).
struct RenamedKey {
  const char* old_path;
  const char* problem;
};
constexpr RenamedKey kRenamedKeys[] = {
    {"train.warmup_steps",
     "renamed to train.timing_skip_steps (steps left out of the throughput figures; the "
     "learning-rate warm-up is train.lr_warmup_steps)"},
};

/// Comma-separated known keys of `section` ("" = top level, sections included).
std::string KnownKeys(const std::string& section) {
  std::vector<std::string> names;
  for (const auto& k : Schema()) {
    if (k.section == section) names.push_back(k.leaf);
  }
  if (section.empty())
    names.insert(names.end(), detail::Sections().begin(), detail::Sections().end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

namespace detail {

bool Loader::Rejected(const std::string& path) const {
  return rejected_.count(path) != 0 || rejected_.count(path.substr(0, path.find('.'))) != 0;
}

void Loader::LoadText(const std::string& text) {
  const Origin origin = Origin::File(root_.file);
  const ParsedText parsed = ParseFirstDocument(text, origin, "<yaml>", "");
  const YAML::Node& doc = parsed.doc;
  const std::vector<YAML::Mark>& roots = parsed.roots;
  const std::string expected =
      "a job file is a mapping of keys with at least name and model.name (or launch.command)";
  if (roots.empty() || doc.IsNull()) {
    Fail(roots.empty() ? origin.Start() : origin.At(doc.Mark()), kDocumentKey,
         "empty document; " + expected);
  }
  if (roots.size() > 1) {
    Fail(origin.At(roots[1]), kDocumentKey, "more than one YAML document; " + expected);
  }
  if (!doc.IsMap()) {
    Fail(origin.At(doc.Mark()), kDocumentKey, "got " + Describe(doc) + "; " + expected);
  }
  root_ = origin.At(doc.Mark());
  ApplyMapping(doc, "", origin);
}

bool Loader::Listing() const { return errors_.size() < kMaxListedProblems; }

void Loader::ApplyMapping(const YAML::Node& map, const std::string& section, const Origin& origin) {
  std::map<std::string, YAML::Mark> seen;
  for (const auto& kv : map) {
    const YAML::Node& key = kv.first;
    const YAML::Node& value = kv.second;
    if (!key.IsScalar()) {
      Fail(origin.At(key.Mark()), section.empty() ? kDocumentKey : section,
           "keys must be strings, got " + Describe(key));
    }
    const std::string& leaf = key.Scalar();
    const std::string path = section.empty() ? leaf : section + "." + leaf;
    Collect(path, [&] {
      const auto [first, fresh] = seen.emplace(leaf, key.Mark());
      if (!fresh) {
        Fail(origin.At(key.Mark()), KeyText(path),
             "duplicate key (first given at " + Position(origin.At(first->second)) + ")");
      }
      if (section.empty() && IsSection(leaf)) {
        if (!value.IsMap()) {
          const bool far = value.IsNull() && value.Mark().line != key.Mark().line;
          Fail(origin.At(far ? key.Mark() : value.Mark()), path,
               "expected a mapping of " + leaf + ".* keys, got " + Describe(value));
        }
        sections_.emplace(leaf, origin.At(key.Mark()));
        ApplyMapping(value, leaf, origin);
        return;
      }
      const KeySpec* spec = FindKey(section, leaf);
      if (spec == nullptr) FailUnknown(origin.At(key.Mark()), section, leaf);
      ApplyValue(*spec, &key, value, origin);
    });
  }
}

void Loader::ApplyValue(const KeySpec& spec, const YAML::Node* key, const YAML::Node& value,
                        const Origin& origin) {
  if (value.IsNull()) {
    // `key:` with nothing after it: the null's mark is wherever the next token is.
    const bool far = key != nullptr && value.Mark().line != key->Mark().line;
    Fail(origin.At(far ? key->Mark() : value.Mark()), spec.path,
         std::string("null value; expected ") + detail::TypeName(spec.type) +
             " (leave the key out for the default)");
  }
  spec.assign(value, origin, config_);
  given_[spec.path] = Given{origin.At(value.Mark()), ++ordinal_};
}

void Loader::FailUnknown(const Where& where, const std::string& section, const std::string& leaf) {
  const std::string path = section.empty() ? leaf : section + "." + leaf;
  for (const RenamedKey& renamed : kRenamedKeys) {
    if (path == renamed.old_path) Fail(where, path, renamed.problem);
  }
  // Past the problems listed, it is only counted: no suggestion is looked for (a file of a
  // million unknown keys must not take minutes).
  if (!Listing()) Fail(where, KeyText(path), "unknown key");
  const std::string hint = SuggestKey(section, leaf);
  if (!hint.empty()) Fail(where, KeyText(path), "unknown key (did you mean " + hint + "?)");
  // The list of a section's keys once, at its first unknown key without a suggestion.
  if (known_listed_.insert(section).second) {
    Fail(where, KeyText(path), "unknown key (known: " + KnownKeys(section) + ")");
  }
  Fail(where, KeyText(path),
       std::string("unknown key (the known ") +
           (section.empty() ? "top-level keys" : section + ".* keys") + " are listed above)");
}

void Loader::ApplyOverride(size_t index, const std::string& text) {
  const std::string key = text.substr(0, text.find('='));
  Collect(key, [&] { ApplyOverrideText(index, text); });
}

void Loader::ApplyOverrideText(size_t index, const std::string& text) {
  const std::string label = "--set[" + std::to_string(index + 1) + "]";
  const Where at_key{label, 1, 1};
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    Fail(at_key, eq == 0 ? "<override>" : KeyText(text),
         "expected KEY=VALUE (e.g. train.steps=200), got " + Quote(text));
  }
  const std::string key = text.substr(0, eq);
  const Origin origin = Origin::Override(label, static_cast<int>(eq) + 2);
  // The same document check as a job file's: anything after the value is an error, not
  // dropped (`train={steps: 5} junk` is no more valid here than in the file).
  const ParsedText parsed =
      ParseFirstDocument(text.substr(eq + 1), origin, KeyText(key), "cannot parse value as YAML: ");
  const YAML::Node& value = parsed.doc;
  if (parsed.roots.size() > 1) {
    Fail(origin.At(parsed.roots[1]), KeyText(key),
         "text after the value: an override is one YAML value (quote text meant as one "
         "string)");
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (parts.back().empty()) Fail(at_key, KeyText(key), "malformed key (empty part)");
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (!IsSection(parts[0])) {
    const KeySpec* top = FindKey("", parts[0]);
    if (top != nullptr && parts.size() == 1) return ApplyValue(*top, nullptr, value, origin);
    if (top != nullptr) Fail(at_key, KeyText(key), parts[0] + " is not a section");
    FailUnknown(at_key, "", parts[0]);
  }
  if (parts.size() == 1) {
    if (!value.IsMap()) {
      Fail(origin.At(value.Mark()), key,
           "expected a mapping of " + key + ".* keys, got " + Describe(value));
    }
    return ApplyMapping(value, parts[0], origin);
  }
  const KeySpec* spec = FindKey(parts[0], parts[1]);
  if (spec == nullptr) FailUnknown(at_key, parts[0], parts[1]);
  if (parts.size() > 2) Fail(at_key, KeyText(key), spec->path + " is not a section");
  ApplyValue(*spec, nullptr, value, origin);
}

void Loader::ImplyBackend(Backend backend, const std::string& command) {
  const auto given = given_.find("launch.backend");
  if (given != given_.end() && given->second.where.file.rfind("--set[", 0) == 0 &&
      config_.launch.backend != backend && !Rejected("launch.backend")) {
    Collect("launch.backend", [&] {
      Fail(given->second.where, "launch.backend",
           "'" + command + "' runs the job with launch.backend " + ToString(backend) + ", not " +
               ToString(config_.launch.backend) + " (leave the override out)");
    });
    return;
  }
  config_.launch.backend = backend;
}

JobConfig Loader::Finish() {
  if (!IsGiven("name") && !Rejected("name")) {
    Collect("name", [&] { Fail(root_, "name", "required key missing"); });
  }
  // A launch.command that was rejected still says the job meant to run a program.
  if (!IsGiven("model.name") && !Rejected("model.name") && !RunsCommand(config_) &&
      !Rejected("launch.command")) {
    const auto model = sections_.find("model");
    Collect("model.name", [&] {
      Fail(model != sections_.end() ? model->second : root_, "model.name",
           "required key missing (one of " + ModelNameList() +
               "; or launch.command to run your own program)");
    });
  }
  if (!IsGiven("model.num_classes")) {
    config_.model.num_classes = DefaultNumClasses(config_.model.name);
  }

  CrossCheck();
  if (unlisted_ > 0) errors_.push_back("... and " + std::to_string(unlisted_) + " more");
  if (!errors_.empty()) throw ConfigError(errors_);
  return config_;
}

}  // namespace detail

namespace {

void EmitValue(YAML::Emitter& out, const detail::Value& v) {
  if (v.is_list) {
    out << YAML::Flow << YAML::BeginSeq;
    for (const auto& item : v.items) out << YAML::DoubleQuoted << item;
    out << YAML::EndSeq;
  } else if (v.quoted) {
    out << YAML::DoubleQuoted << v.scalar;
  } else {
    out << v.scalar;
  }
}

}  // namespace

namespace detail {

Where Origin::At(const YAML::Mark& mark) const {
  if (mark.is_null() || mark.line < 0 || mark.column < 0) return Start();
  if (is_override_) return Where{file_, 1, mark.line == 0 ? col_ + mark.column : col_};
  return Where{file_, mark.line + 1, mark.column + 1};
}

void Fail(const Where& where, const std::string& key, const std::string& problem) {
  throw ConfigError(where.file + ":" + std::to_string(where.line) + ":" +
                    std::to_string(where.col) + ": " + key + ": " + problem);
}

const char* TypeName(ValueType type) {
  switch (type) {
    case ValueType::kInt:
      return "int";
    case ValueType::kFloat:
      return "float";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kEnum:
      return "enum";
    case ValueType::kHostList:
      return "host list";
    case ValueType::kStringList:
      return "string list";
  }
  return "?";
}

std::string Quote(const std::string& value) {
  constexpr size_t kMax = 80;
  std::string out = "\"";
  for (size_t i = 0; i < value.size() && i < kMax; ++i) {
    const unsigned char ch = static_cast<unsigned char>(value[i]);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  if (value.size() > kMax) out += "...";
  return out + "\"";
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      if (node.Tag() == "?") return Quote(node.Scalar());
      if (node.Tag() == "!") return "the quoted string " + Quote(node.Scalar());
      return Quote(node.Scalar()) + " tagged " + node.Tag();
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

}  // namespace detail

namespace {

JobConfig Parse(const std::string& yaml_text, const std::string& source,
                const std::vector<std::string>& overrides, const Backend* implied) {
  Loader loader(source);
  loader.LoadText(yaml_text);
  for (size_t i = 0; i < overrides.size(); ++i) loader.ApplyOverride(i, overrides[i]);
  if (implied != nullptr) {
    loader.ImplyBackend(*implied, std::string("ringpilot ") + ToString(*implied));
  }
  return loader.Finish();
}

std::string ReadJobFile(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  int error = fd < 0 ? errno : 0;
  if (fd >= 0) {
    char buf[65536];
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        text.append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        break;
      } else if (errno != EINTR) {
        error = errno;
        break;
      }
    }
    ::close(fd);
  }
  if (error != 0) {
    Fail(Where{path, 1, 1}, "<file>", std::string("cannot read: ") + std::strerror(error));
  }
  return text;
}

}  // namespace

ConfigError::ConfigError(const std::string& line) : std::runtime_error(line), lines_{line} {}

ConfigError::ConfigError(std::vector<std::string> lines)
    : std::runtime_error([&lines] {
        std::string text;
        for (const std::string& line : lines) text += (text.empty() ? "" : "\n") + line;
        return text;
      }()),
      lines_(std::move(lines)) {}

JobConfig ParseJobConfig(const std::string& yaml_text, const std::string& source,
                         const std::vector<std::string>& overrides) {
  return Parse(yaml_text, source, overrides, nullptr);
}

JobConfig LoadJobConfig(const std::string& path, const std::vector<std::string>& overrides) {
  return Parse(ReadJobFile(path), path, overrides, nullptr);
}

JobConfig LoadJobConfigFor(Backend backend, const std::string& path,
                           const std::vector<std::string>& overrides) {
  return Parse(ReadJobFile(path), path, overrides, &backend);
}

std::string EmitJobConfig(const JobConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string open_section;
  for (const KeySpec& spec : Schema()) {
    if (spec.trainer_only && RunsCommand(config)) continue;
    const detail::Value value = spec.get(config);
    if (spec.omit_empty && value.is_list && value.items.empty()) continue;
    if (spec.section != open_section) {
      if (!open_section.empty()) out << YAML::EndMap;
      out << YAML::Key << spec.section << YAML::Value << YAML::BeginMap;
      open_section = spec.section;
    }
    out << YAML::Key << spec.leaf << YAML::Value;
    EmitValue(out, value);
  }
  if (!open_section.empty()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

int MetricsPort(const MetricsConfig& metrics, int local_rank) {
  return base::MetricsPort(metrics.port_base, local_rank);
}

int64_t GlobalBatch(const JobConfig& config) {
  return static_cast<int64_t>(config.world.size()) * config.data.batch_per_rank *
         config.train.grad_accum_steps;
}

double PeakLearningRate(const JobConfig& config) {
  if (config.train.lr_base_batch <= 0) return config.train.lr;
  return config.train.lr * static_cast<double>(GlobalBatch(config)) /
         static_cast<double>(config.train.lr_base_batch);
}

}  // namespace ringpilot::config
