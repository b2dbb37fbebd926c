// Merging the per-rank Chrome traces of a run into one timeline (see diagnose.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "diagnose/diagnose.h"
#include "history/rank_files.h"
#include "history/record_fields.h"

namespace ringpilot::diagnose {
namespace fs = std::filesystem;
using nlohmann::json;

TraceMerge MergeTraces(const std::string& run_dir) {
  TraceMerge result;
  std::map<int, std::string> files = history::TraceFiles(run_dir);
  files.erase(files.upper_bound(history::kMaxRecordRank), files.end());
  if (files.empty()) return result;
  json events = json::array();
  for (const auto& [rank, path] : files) {
    std::ifstream in(path, std::ios::binary);
    json doc;
    try {
      if (!in) throw std::runtime_error("cannot be read");
      std::ostringstream buf;
      buf << in.rdbuf();
      doc = json::parse(buf.str());
      if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
        throw std::runtime_error("no traceEvents array");
      }
    } catch (const std::exception& e) {
      result.warnings.push_back(path + ": " + e.what() + ": skipped");
      continue;
    }
    std::string name = "rank " + std::to_string(rank);
    for (json& ev : doc["traceEvents"]) {
      if (!ev.is_object()) continue;
      const std::string ph = ev.value("ph", "");
      const std::string what = ev.value("name", "");
      if (ph == "M" && what == "process_name" && ev.contains("args") &&
          ev["args"].contains("name") && ev["args"]["name"].is_string()) {
        name = ev["args"]["name"].get<std::string>();
        continue;  // re-emitted below with the rank's pid
      }
      if (ph == "M" && what == "process_sort_index") continue;
      ev["pid"] = rank;  // the file name decides: one process per rank
      if (ph == "X") ++result.events;
      events.push_back(std::move(ev));
    }
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", 0},
                      {"args", {{"name", name}}}});
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", 0},
                      {"args", {{"sort_index", rank}}}});
    ++result.ranks;
  }
  if (result.ranks == 0) return result;
  const fs::path out_path = fs::path(run_dir) / "trace.json";
  const fs::path tmp = fs::path(run_dir) / "trace.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump() << "\n";
    if (!out) throw DiagnoseError(tmp.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, out_path, ec);
  if (ec) throw DiagnoseError(out_path.string() + ": cannot be written: " + ec.message());
  result.path = out_path.string();
  return result;
}

}  // namespace ringpilot::diagnose
