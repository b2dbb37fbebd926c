// The metric families of one process on prometheus-cpp (docs/metrics.md): a
// prometheus::Registry whose families all carry the same constant labels (a rank's job,
// node, rank, local_rank, ...), plus bucket layouts for histograms.
//
// Threading model (prometheus-cpp 1.0.1): families and series are created at setup
// (Families::Add*, prometheus::Family::Add, which lock and allocate; keep the returned
// reference), then updated from hot paths: Counter::Increment and Gauge::Set/Increment are
// lock-free atomics; Histogram::Observe takes the histogram's own mutex, which a scrape
// holds only while it copies that histogram's buckets. Collect() (a scrape) may run on any
// thread at any time.
#pragma once

#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/labels.h>
#include <prometheus/registry.h>

namespace ringpilot::metrics {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
/// Label name -> value. prometheus-cpp writes a series' constant labels first, then its
/// own, each group sorted by name.
using Labels = prometheus::Labels;

/// Thrown for setup errors: an invalid metric name or constant label, a name registered
/// twice with another type, help text the text format cannot carry, invalid buckets. The
/// message names the metric.
class MetricsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// `count` bounds: start, start*factor, start*factor^2, ... Requires start > 0,
/// factor > 1, count >= 1; throws MetricsError otherwise.
std::vector<double> ExponentialBuckets(double start, double factor, int count);
/// `count` bounds: start, start+width, start+2*width, ... Requires width > 0, count >= 1.
std::vector<double> LinearBuckets(double start, double width, int count);

/// Owns a prometheus::Registry (shared with the exporter, which holds it weakly) and adds
/// `const_labels` to every family registered through it. Thread-safe.
class Families {
 public:
  /// Throws MetricsError for an invalid or reserved (`__` prefix) label name.
  explicit Families(Labels const_labels = {});
  /// Same; lets `Families f({{"rank", "0"}})` (a single pair) resolve unambiguously.
  explicit Families(std::initializer_list<Labels::value_type> const_labels)
      : Families(Labels(const_labels)) {}
  Families(const Families&) = delete;
  Families& operator=(const Families&) = delete;

  /// Registers (or returns the existing) family. The same name again with the same type
  /// returns the same family (the first help text stays). Throws MetricsError for an
  /// invalid name, a name taken by another type, or help text containing `\` or a newline
  /// (prometheus-cpp 1.0.1 writes HELP unescaped). Series: family.Add(labels), for
  /// histograms family.Add(labels, Histogram::BucketBoundaries{...}) (a braced list alone
  /// does not deduce); the reference stays valid as long as this object.
  Family<Counter>& AddCounter(const std::string& name, const std::string& help);
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help);
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help);

  const Labels& const_labels() const { return const_labels_; }
  /// What an exporter serves (prometheus::Exposer::RegisterCollectable takes it weakly).
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  /// Text exposition (prometheus::TextSerializer) of every family that has a series; what
  /// GET /metrics serves, less the exporter's own `exposer_*` series.
  std::string Serialize() const;

 private:
  template <class Metric>
  Family<Metric>& Add(prometheus::detail::Builder<Metric> builder, const std::string& name,
                      const std::string& help);

  const Labels const_labels_;
  const std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace ringpilot::metrics
