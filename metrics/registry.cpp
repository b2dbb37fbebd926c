#include "metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "metrics/exposition.h"

namespace ringpilot::metrics {
namespace {

// C++17 has no fetch_add for atomic<double>; a relaxed CAS loop is lock-free and
// never allocates. Ordering with other memory is irrelevant for a metric value.
void AtomicAdd(std::atomic<double>& target, double v) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + v, std::memory_order_relaxed)) {
  }
}

const char* TypeName(detail::MetricType type) {
  switch (type) {
    case detail::MetricType::kCounter:
      return "counter";
    case detail::MetricType::kGauge:
      return "gauge";
    case detail::MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out = "(";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  return out + ")";
}

// `where` prefixes the message so the error names the metric being set up.
std::vector<double> NormalizeBounds(std::vector<double> bounds, const std::string& where) {
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) bounds.pop_back();
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      throw MetricsError(where + "bucket bound " + FormatValue(bounds[i]) +
                         " is not finite (only a trailing +Inf is allowed)");
    }
    if (i > 0 && !(bounds[i] > bounds[i - 1])) {
      throw MetricsError(where + "bucket bounds must be strictly increasing, got " +
                         FormatValue(bounds[i - 1]) + " then " + FormatValue(bounds[i]));
    }
  }
  return bounds;
}

// The names a family occupies in the exposition: its own and its samples' names.
std::vector<std::string> OccupiedNames(detail::MetricType type, const std::string& name) {
  if (type == detail::MetricType::kHistogram) {
    return {name, name + "_bucket", name + "_sum", name + "_count"};
  }
  return {name};
}

void CheckLabel(const std::string& where, const std::string& name, const std::string& value) {
  if (!IsValidLabelName(name)) {
    throw MetricsError(where + "invalid label name " + Quoted(name) +
                       " (must match [a-zA-Z_][a-zA-Z0-9_]* without a '__' prefix)");
  }
  if (!IsValidUtf8(value)) {
    throw MetricsError(where + "value of label " + Quoted(name) + " is not valid UTF-8");
  }
}

void AppendLabelPair(std::string& out, const std::string& name, const std::string& value) {
  if (!out.empty()) out += ',';
  out += name;
  out += "=\"";
  AppendEscapedLabelValue(out, value);
  out += '"';
}

void AppendSample(std::string& out, const std::string& name, const char* suffix,
                  const std::string& labels, const std::string& extra_label) {
  out += name;
  out += suffix;
  if (!labels.empty() || !extra_label.empty()) {
    out += '{';
    out += labels;
    if (!labels.empty() && !extra_label.empty()) out += ',';
    out += extra_label;
    out += '}';
  }
  out += ' ';
}

void AppendSeries(std::string& out, const std::string& name, const std::string& labels,
                  const Counter& counter) {
  AppendSample(out, name, "", labels, "");
  AppendValue(out, counter.Value());
  out += '\n';
}

void AppendSeries(std::string& out, const std::string& name, const std::string& labels,
                  const Gauge& gauge) {
  AppendSample(out, name, "", labels, "");
  AppendValue(out, gauge.Value());
  out += '\n';
}

void AppendSeries(std::string& out, const std::string& name, const std::string& labels,
                  const Histogram& histogram) {
  // One snapshot of the buckets, so _count and the +Inf bucket agree.
  const std::vector<std::uint64_t> cumulative = histogram.BucketCounts();
  const std::vector<double>& bounds = histogram.Bounds();
  for (std::size_t i = 0; i < cumulative.size(); ++i) {
    std::string le = "le=\"";
    if (i < bounds.size()) {
      AppendValue(le, bounds[i]);
    } else {
      le += "+Inf";
    }
    le += '"';
    AppendSample(out, name, "_bucket", labels, le);
    AppendValue(out, cumulative[i]);
    out += '\n';
  }
  AppendSample(out, name, "_sum", labels, "");
  AppendValue(out, histogram.Sum());
  out += '\n';
  AppendSample(out, name, "_count", labels, "");
  AppendValue(out, cumulative.back());
  out += '\n';
}

}  // namespace

// --- metrics ---------------------------------------------------------------

void Counter::Increment(double v) {
  if (!(v >= 0.0)) return;  // also rejects NaN
  AtomicAdd(value_, v);
}

double Counter::Value() const { return value_.load(std::memory_order_relaxed); }

void Gauge::Set(double v) { value_.store(v, std::memory_order_relaxed); }

void Gauge::Add(double v) { AtomicAdd(value_, v); }

double Gauge::Value() const { return value_.load(std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> bucket_bounds)
    : bounds_(NormalizeBounds(std::move(bucket_bounds), "metrics: histogram: ")),
      counts_(new std::atomic<std::uint64_t>[bounds_.size() + 1]) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    counts_[i].store(0, std::memory_order_relaxed);
  }
}

void Histogram::Observe(double v) {
  // lower_bound gives the first bound >= v, which is Prometheus' `le` semantics.
  // NaN compares false with everything and would land in bucket 0, so route it to +Inf.
  const std::size_t bucket =
      std::isnan(v) ? bounds_.size()
                    : static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                               bounds_.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
}

std::uint64_t Histogram::Count() const {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
  }
  return total;
}

double Histogram::Sum() const { return sum_.load(std::memory_order_relaxed); }

std::vector<std::uint64_t> Histogram::BucketCounts() const {
  std::vector<std::uint64_t> cumulative(bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    cumulative[i] = running;
  }
  return cumulative;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0.0) || !std::isfinite(start) || !(factor > 1.0) || !std::isfinite(factor) ||
      count < 1) {
    throw MetricsError("metrics: ExponentialBuckets(" + FormatValue(start) + ", " +
                       FormatValue(factor) + ", " + std::to_string(count) +
                       "): needs start > 0, factor > 1, count >= 1");
  }
  std::vector<double> bounds;
  bounds.reserve(static_cast<std::size_t>(count));
  double bound = start;
  for (int i = 0; i < count; ++i) {
    if (!std::isfinite(bound)) {
      throw MetricsError("metrics: ExponentialBuckets: bound " + std::to_string(i) +
                         " overflows a double");
    }
    bounds.push_back(bound);
    bound *= factor;
  }
  return bounds;
}

std::vector<double> LinearBuckets(double start, double width, int count) {
  if (!std::isfinite(start) || !(width > 0.0) || !std::isfinite(width) || count < 1) {
    throw MetricsError("metrics: LinearBuckets(" + FormatValue(start) + ", " + FormatValue(width) +
                       ", " + std::to_string(count) +
                       "): needs a finite start, width > 0, count >= 1");
  }
  std::vector<double> bounds;
  bounds.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    // Multiplying instead of accumulating keeps 0.1-style widths from drifting.
    const double bound = start + width * i;
    if (!bounds.empty() && !(bound > bounds.back())) {
      throw MetricsError("metrics: LinearBuckets: width " + FormatValue(width) +
                         " is too small to separate bounds near " + FormatValue(bound));
    }
    bounds.push_back(bound);
  }
  return bounds;
}

// --- Family ----------------------------------------------------------------

template <class Metric>
struct Family<Metric>::Series {
  std::string rendered_labels;  // `a="x",b="y"`, const labels first, already escaped
  std::unique_ptr<Metric> metric;
};

template <class Metric>
Family<Metric>::Family(std::string name, std::string help, const Labels& const_labels,
                       std::vector<double> bucket_bounds)
    : FamilyBase(std::move(name), std::move(help),
                 std::is_same_v<Metric, Counter> ? detail::MetricType::kCounter
                 : std::is_same_v<Metric, Gauge> ? detail::MetricType::kGauge
                                                 : detail::MetricType::kHistogram),
      const_labels_(const_labels),
      bucket_bounds_(std::move(bucket_bounds)) {}

template <class Metric>
Family<Metric>::~Family() = default;

template <class Metric>
Metric& Family<Metric>::Add(const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(labels); it != index_.end()) return *it->second;

  const std::string where = "metrics: " + name() + ": ";
  std::vector<std::string> names;
  names.reserve(labels.size());
  for (const auto& [label, value] : labels) {
    CheckLabel(where, label, value);
    if (type() == detail::MetricType::kHistogram && label == "le") {
      throw MetricsError(where + "label 'le' is reserved for histogram buckets");
    }
    for (const auto& [const_label, unused] : const_labels_) {
      if (label == const_label) {
        throw MetricsError(where + "label " + Quoted(label) +
                           " is already a const label of the registry");
      }
    }
    if (std::find(names.begin(), names.end(), label) != names.end()) {
      throw MetricsError(where + "label " + Quoted(label) + " given twice");
    }
    names.push_back(label);
  }
  // Series of one family with different label names confuse PromQL aggregations;
  // in practice it is a typo at a call site, so refuse it at setup.
  if (label_names_fixed_ && names != label_names_) {
    throw MetricsError(where + "label names " + JoinNames(names) + " differ from the family's " +
                       JoinNames(label_names_));
  }
  label_names_ = std::move(names);
  label_names_fixed_ = true;

  auto series = std::make_unique<Series>();
  for (const auto& [label, value] : const_labels_) {
    AppendLabelPair(series->rendered_labels, label, value);
  }
  for (const auto& [label, value] : labels) AppendLabelPair(series->rendered_labels, label, value);
  if constexpr (std::is_same_v<Metric, Histogram>) {
    series->metric = std::make_unique<Histogram>(bucket_bounds_);
  } else {
    series->metric = std::make_unique<Metric>();
  }
  Metric* metric = series->metric.get();
  series_.push_back(std::move(series));
  index_.emplace(labels, metric);
  return *metric;
}

template <class Metric>
std::size_t Family<Metric>::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return series_.size();
}

template <class Metric>
void Family<Metric>::SerializeTo(std::string& out) const {
  // Holds only this family's mutex, which updates never take; a concurrent Add
  // (setup path) waits for the scrape to pass this family.
  std::lock_guard<std::mutex> lock(mu_);
  if (series_.empty()) return;  // HELP/TYPE without samples tells a scraper nothing
  if (!help().empty()) {
    out += "# HELP ";
    out += name();
    out += ' ';
    AppendEscapedHelp(out, help());
    out += '\n';
  }
  out += "# TYPE ";
  out += name();
  out += ' ';
  out += TypeName(type());
  out += '\n';
  for (const auto& series : series_) {
    AppendSeries(out, name(), series->rendered_labels, *series->metric);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// --- Registry --------------------------------------------------------------

Registry::Registry(Labels const_labels) : const_labels_(std::move(const_labels)) {
  const std::string where = "metrics: registry const labels: ";
  std::vector<std::string> seen;
  for (const auto& [label, value] : const_labels_) {
    CheckLabel(where, label, value);
    if (label == "le") {
      throw MetricsError(where + "label 'le' is reserved for histogram buckets");
    }
    if (std::find(seen.begin(), seen.end(), label) != seen.end()) {
      throw MetricsError(where + "label " + Quoted(label) + " given twice");
    }
    seen.push_back(label);
  }
}

Registry::~Registry() = default;

template <class Metric>
Family<Metric>& Registry::AddFamily(detail::MetricType type, const std::string& name,
                                    const std::string& help, std::vector<double> bucket_bounds) {
  if (!IsValidMetricName(name)) {
    throw MetricsError("metrics: invalid metric name " + Quoted(name) +
                       " (must match [a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  const std::string where = "metrics: " + name + ": ";
  if (!IsValidUtf8(help)) throw MetricsError(where + "help text is not valid UTF-8");
  if (type == detail::MetricType::kHistogram) {
    bucket_bounds = NormalizeBounds(std::move(bucket_bounds), where);
  }

  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<std::string> wanted = OccupiedNames(type, name);
  for (const auto& family : families_) {
    if (family->name() == name) {
      if (family->type() != type) {
        throw MetricsError(where + "already registered as a " + TypeName(family->type()) +
                           ", cannot register it as a " + TypeName(type));
      }
      auto& existing = static_cast<Family<Metric>&>(*family);
      if (existing.bucket_bounds_ != bucket_bounds) {
        throw MetricsError(where + "already registered with different bucket bounds");
      }
      return existing;
    }
    for (const std::string& taken : OccupiedNames(family->type(), family->name())) {
      if (std::find(wanted.begin(), wanted.end(), taken) != wanted.end()) {
        throw MetricsError(where + "clashes with the series " + Quoted(taken) + " of " +
                           TypeName(family->type()) + " " + Quoted(family->name()));
      }
    }
  }
  // The constructor is private (families only live inside a registry), so no make_unique.
  std::unique_ptr<Family<Metric>> family(
      new Family<Metric>(name, help, const_labels_, std::move(bucket_bounds)));
  Family<Metric>& result = *family;
  families_.push_back(std::move(family));
  return result;
}

Family<Counter>& Registry::AddCounter(const std::string& name, const std::string& help) {
  return AddFamily<Counter>(detail::MetricType::kCounter, name, help, {});
}

Family<Gauge>& Registry::AddGauge(const std::string& name, const std::string& help) {
  return AddFamily<Gauge>(detail::MetricType::kGauge, name, help, {});
}

Family<Histogram>& Registry::AddHistogram(const std::string& name, const std::string& help,
                                          std::vector<double> bucket_bounds) {
  return AddFamily<Histogram>(detail::MetricType::kHistogram, name, help, std::move(bucket_bounds));
}

std::string Registry::Serialize() const {
  std::string out;
  SerializeTo(out);
  return out;
}

void Registry::SerializeTo(std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& family : families_) family->SerializeTo(out);
}

}  // namespace ringpilot::metrics
