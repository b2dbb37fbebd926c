#include "metrics/counter_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

namespace ringpilot::metrics {
namespace {

// {"NAME": [{"labels": {...}, "value": V}, ...], ...}
nlohmann::json ToJson(const std::map<std::string, std::map<Labels, double>>& values) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, series] : values) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [labels, value] : series) {
      list.push_back({{"labels", labels}, {"value", value}});
    }
    out[name] = std::move(list);
  }
  return out;
}

}  // namespace

CounterJournal::CounterJournal(std::shared_ptr<prometheus::Registry> registry, std::string path,
                               Labels const_labels, std::set<std::string> names)
    : registry_(std::move(registry)),
      path_(std::move(path)),
      const_labels_(std::move(const_labels)),
      names_(std::move(names)) {
  std::ifstream in(path_);
  if (!in) return;
  try {
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& [name, list] : doc.items()) {
      if (!names_.count(name)) continue;
      for (const auto& s : list) {
        const double value = s.at("value").get<double>();
        if (value > 0) seeded_[name][s.at("labels").get<Labels>()] = value;
      }
    }
  } catch (const nlohmann::json::exception&) {
    seeded_.clear();  // a torn or foreign file: start from 0 rather than from part of it
  }
}

double CounterJournal::Seeded(const std::string& name, const Labels& labels) const {
  const auto it = seeded_.find(name);
  if (it == seeded_.end()) return 0;
  const auto s = it->second.find(labels);
  return s == it->second.end() ? 0 : s->second;
}

std::vector<Labels> CounterJournal::SeededSeries(const std::string& name) const {
  std::vector<Labels> out;
  const auto it = seeded_.find(name);
  if (it == seeded_.end()) return out;
  for (const auto& [labels, value] : it->second) out.push_back(labels);
  return out;
}

std::vector<prometheus::MetricFamily> CounterJournal::Collect() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  Write(families);
  return families;
}

void CounterJournal::Save() const {
  std::lock_guard<std::mutex> lock(mu_);
  Write(registry_->Collect());
}

void CounterJournal::Write(const std::vector<prometheus::MetricFamily>& families) const {
  Values values;
  for (const prometheus::MetricFamily& f : families) {
    if (f.type != prometheus::MetricType::Counter || !names_.count(f.name)) continue;
    auto& series = values[f.name];
    for (const prometheus::ClientMetric& m : f.metric) {
      Labels own;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (!const_labels_.count(l.name)) own.emplace(l.name, l.value);
      }
      series[own] = m.counter.value;
    }
  }
  const std::string text = ToJson(values).dump() + "\n";
  const std::string tmp = path_ + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;  // a journal that cannot be written costs a reset, not the scrape
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (ok) ::rename(tmp.c_str(), path_.c_str());
}

}  // namespace ringpilot::metrics
