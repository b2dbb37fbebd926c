#include "history/rank_files.h"

#include <cctype>
#include <fstream>
#include <vector>

#include "base/files.h"

namespace ringpilot::history {

std::map<int, std::string> RankFiles(const std::string& logs_dir, const std::string& suffix) {
  std::map<int, std::string> files;
  std::vector<std::string> names;
  try {
    names = base::ListDir(logs_dir);
  } catch (const base::FileError&) {
    return files;
  }
  static const std::string kPrefix = "rank-";
  for (const std::string& name : names) {
    if (name.size() <= kPrefix.size() + suffix.size() || name.compare(0, kPrefix.size(), kPrefix) ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix)) {
      continue;
    }
    const std::string digits =
        name.substr(kPrefix.size(), name.size() - kPrefix.size() - suffix.size());
    bool decimal = digits.size() <= 9;
    for (char c : digits) decimal = decimal && std::isdigit(static_cast<unsigned char>(c));
    if (decimal) files.emplace(std::stoi(digits), logs_dir + "/" + name);
  }
  return files;
}

nlohmann::json ReadJsonObject(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json(nlohmann::json::value_t::discarded);
}

}  // namespace ringpilot::history
