// In-process metric registry with Prometheus text exposition.
//
// Threading model: metrics are created at setup (Registry::Add*, Family::Add, which lock),
// then updated from hot paths (Counter::Increment, Gauge::Set/Add, Histogram::Observe,
// which are lock-free and allocation-free) while an HTTP thread calls Registry::Serialize.
// Updates never wait for a scrape, and a scrape never stops updates.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ringpilot::metrics {

/// Label name/value pairs. Output keeps this order (const labels first).
using Labels = std::vector<std::pair<std::string, std::string>>;

/// Thrown for setup errors: invalid names or labels, conflicting registrations,
/// invalid bucket layouts. The message names the metric and the offending item.
class MetricsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

static_assert(std::atomic<double>::is_always_lock_free, "hot path needs lock-free double atomics");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "hot path needs lock-free 64-bit atomics");

/// A monotonically increasing value. By convention its name ends in `_total`
/// (not enforced; `promtool check metrics` warns otherwise).
/// Thread-safe; Increment is lock-free (CAS loop) and allocation-free.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  /// Adds `v`. A negative or NaN `v` would break monotonicity and is ignored.
  void Increment(double v = 1.0);
  /// Current total (relaxed read; may miss increments racing with it).
  double Value() const;

 private:
  std::atomic<double> value_{0.0};
};

/// A value that goes up and down. Thread-safe; Set and Add are lock-free and
/// allocation-free. Concurrent Set and Add are linearizable (no lost updates).
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double v);
  /// Adds `v` (may be negative).
  void Add(double v);
  double Value() const;

 private:
  std::atomic<double> value_{0.0};
};

/// Distribution of observations in cumulative buckets (`le` = less than or equal).
/// Thread-safe; Observe is lock-free and allocation-free (binary search + two atomics).
/// Readers see each bucket atomically; `Count()` is derived from the buckets, so the
/// exported `_count` always equals the `+Inf` bucket, while `_sum` may include or miss
/// an observation that races with the read.
class Histogram {
 public:
  /// `bucket_bounds`: finite upper bounds in strictly increasing order; a trailing
  /// +Inf is accepted and dropped (the +Inf bucket always exists). Empty is allowed
  /// (then only the +Inf bucket). Throws MetricsError on NaN, -Inf, non-trailing +Inf
  /// or non-increasing bounds.
  explicit Histogram(std::vector<double> bucket_bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  /// Records `v` in the first bucket whose bound is >= v and adds it to the sum.
  /// NaN lands in the +Inf bucket only and makes the sum NaN (as client_golang does).
  void Observe(double v);

  /// Number of observations (the +Inf cumulative bucket).
  std::uint64_t Count() const;
  double Sum() const;
  /// Cumulative counts: element i counts observations <= Bounds()[i]; the last
  /// element (index Bounds().size()) is the +Inf bucket.
  std::vector<std::uint64_t> BucketCounts() const;
  /// Finite upper bounds, without the implicit +Inf.
  const std::vector<double>& Bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  // Per-bucket (non-cumulative) counts, so Observe touches a single counter.
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
  std::atomic<double> sum_{0.0};
};

/// `count` bounds: start, start*factor, start*factor^2, ... Requires start > 0,
/// factor > 1, count >= 1; throws MetricsError otherwise.
std::vector<double> ExponentialBuckets(double start, double factor, int count);
/// `count` bounds: start, start+width, start+2*width, ... Requires width > 0, count >= 1.
std::vector<double> LinearBuckets(double start, double width, int count);

namespace detail {
enum class MetricType { kCounter, kGauge, kHistogram };

/// Type-erased family, so the registry can hold and serialize all kinds together.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  /// Appends HELP, TYPE and every series; appends nothing for a family without series.
  virtual void SerializeTo(std::string& out) const = 0;

 protected:
  FamilyBase(std::string name, std::string help, MetricType type)
      : name_(std::move(name)), help_(std::move(help)), type_(type) {}

 private:
  std::string name_;
  std::string help_;
  MetricType type_;
};
}  // namespace detail

/// One metric name with any number of label sets (series).
/// Thread-safe: Add locks a per-family mutex (call it at setup or rarely, and keep
/// the reference); updates through the returned reference never lock.
template <class Metric>
class Family : public detail::FamilyBase {
 public:
  ~Family() override;
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  /// Returns the series for `labels`, creating it on first use; the same labels (same
  /// names, values and order) always return the same object. The reference stays valid
  /// for the registry's lifetime. The first call fixes the family's label names and
  /// their order; later calls must use the same names in the same order. Throws
  /// MetricsError for an invalid or reserved label name (`__` prefix; `le` on
  /// histograms), a name repeated or clashing with a const label, invalid UTF-8 in a
  /// value, or label names that differ from the first call's.
  Metric& Add(const Labels& labels = {});

  /// Number of series created so far.
  std::size_t size() const;

  void SerializeTo(std::string& out) const override;

 private:
  friend class Registry;
  struct Series;

  Family(std::string name, std::string help, const Labels& const_labels,
         std::vector<double> bucket_bounds);

  const Labels& const_labels_;
  const std::vector<double> bucket_bounds_;  // histograms only
  mutable std::mutex mu_;
  std::vector<std::string> label_names_;  // fixed by the first Add
  bool label_names_fixed_ = false;
  std::vector<std::unique_ptr<Series>> series_;  // creation order = output order
  std::map<Labels, Metric*> index_;
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

/// Owns every family. Families are output in registration order, series in
/// creation order. Thread-safe: registration and Serialize may run concurrently
/// with each other and with metric updates.
class Registry {
 public:
  /// `const_labels` are put first on every series (e.g. job, node, rank, local_rank).
  /// Throws MetricsError for an invalid, reserved (`__`, `le`) or repeated name or a
  /// value that is not UTF-8.
  explicit Registry(Labels const_labels = {});
  /// Same; lets `Registry r({{"rank", "0"}})` (a single pair) resolve unambiguously.
  explicit Registry(std::initializer_list<std::pair<std::string, std::string>> const_labels)
      : Registry(Labels(const_labels)) {}
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  /// Registers (or returns the existing) family. Registering an existing name with
  /// the same type (and, for histograms, the same buckets) returns the same family and
  /// keeps the first help text. Throws MetricsError for an invalid name, a name
  /// registered with another type or other buckets, or a name that clashes with the
  /// series a histogram emits (`<h>_bucket`, `<h>_sum`, `<h>_count`).
  Family<Counter>& AddCounter(const std::string& name, const std::string& help);
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help);
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> bucket_bounds);

  /// Prometheus text exposition format 0.0.4 of every family that has a series.
  /// Each value is read atomically; no lock is held that an update could wait on.
  std::string Serialize() const;
  /// Same, appended to `out` (lets a caller reuse a buffer).
  void SerializeTo(std::string& out) const;

  const Labels& const_labels() const { return const_labels_; }

 private:
  template <class Metric>
  Family<Metric>& AddFamily(detail::MetricType type, const std::string& name,
                            const std::string& help, std::vector<double> bucket_bounds);

  const Labels const_labels_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<detail::FamilyBase>> families_;
};

}  // namespace ringpilot::metrics
