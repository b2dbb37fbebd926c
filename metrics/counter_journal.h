// Counters that continue across the processes of one job (a restart after a failure, a
// resumed run): the values a scrape serves are written to a file as they are served, and
// the next process starts those counters from there. Prometheus therefore never sees them
// go back, which a counter started from a checkpoint would (a crash after the checkpoint
// loses steps that were already served), and `rate()` shows no spike at a restart.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "metrics/families.h"

namespace ringpilot::metrics {

/// A prometheus::Collectable over `registry` that an exporter serves instead of the
/// registry itself. Thread-safe.
class CounterJournal : public prometheus::Collectable {
 public:
  /// Keeps the counter families named in `names` (their series' own labels; the
  /// `const_labels` of the registry's families are left out, so a process on another host
  /// continues the same values). Reads what an earlier process left at `path`; a missing,
  /// unreadable or malformed file means nothing was left (never throws for it).
  CounterJournal(std::shared_ptr<prometheus::Registry> registry, std::string path,
                 Labels const_labels, std::set<std::string> names);

  /// The value an earlier process served for counter `name` with own labels `labels`;
  /// 0 when none.
  double Seeded(const std::string& name, const Labels& labels) const;
  /// The own label sets of `name` that an earlier process served (for series a process
  /// creates on first use, such as one per culprit rank).
  std::vector<Labels> SeededSeries(const std::string& name) const;

  /// Collects the registry, writes the kept counters as collected (temp file + rename, no
  /// fsync: a beat lost in a host crash only costs a counter reset), and returns what was
  /// collected. Scrapes are serialized here, so the file never holds less than was served.
  std::vector<prometheus::MetricFamily> Collect() const override;
  /// Writes the current values now (at the end of a run, which no scrape may follow).
  void Save() const;

 private:
  using Values = std::map<std::string, std::map<Labels, double>>;  // name -> labels -> value
  void Write(const std::vector<prometheus::MetricFamily>& families) const;

  const std::shared_ptr<prometheus::Registry> registry_;
  const std::string path_;
  const Labels const_labels_;
  const std::set<std::string> names_;
  Values seeded_;
  mutable std::mutex mu_;
};

}  // namespace ringpilot::metrics
