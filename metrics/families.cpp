#include "metrics/families.h"

#include <cmath>
#include <sstream>

#include <prometheus/check_names.h>
#include <prometheus/text_serializer.h>

namespace ringpilot::metrics {
namespace {

// Numbers in error messages, as the exposition writes them.
std::string Number(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

}  // namespace

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0.0) || !std::isfinite(start) || !(factor > 1.0) || !std::isfinite(factor) ||
      count < 1) {
    throw MetricsError("metrics: ExponentialBuckets(" + Number(start) + ", " + Number(factor) +
                       ", " + std::to_string(count) + "): needs start > 0, factor > 1, count >= 1");
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
    throw MetricsError("metrics: LinearBuckets(" + Number(start) + ", " + Number(width) + ", " +
                       std::to_string(count) + "): needs a finite start, width > 0, count >= 1");
  }
  std::vector<double> bounds;
  bounds.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    // Multiplying instead of accumulating keeps 0.1-style widths from drifting.
    const double bound = start + width * i;
    if (!bounds.empty() && !(bound > bounds.back())) {
      throw MetricsError("metrics: LinearBuckets: width " + Number(width) +
                         " is too small to separate bounds near " + Number(bound));
    }
    bounds.push_back(bound);
  }
  return bounds;
}

Families::Families(Labels const_labels)
    : const_labels_(std::move(const_labels)), registry_(std::make_shared<prometheus::Registry>()) {
  for (const auto& [name, value] : const_labels_) {
    // `le` would clash with the bucket label of every histogram.
    if (!prometheus::CheckLabelName(name) || name == "le") {
      throw MetricsError("metrics: invalid constant label name '" + name +
                         "' (must match [a-zA-Z_][a-zA-Z0-9_]* without a '__' prefix, not 'le')");
    }
  }
}

template <class Metric>
Family<Metric>& Families::Add(prometheus::detail::Builder<Metric> builder, const std::string& name,
                              const std::string& help) {
  const std::string where = "metrics: " + name + ": ";
  if (!prometheus::CheckMetricName(name)) {
    throw MetricsError("metrics: invalid metric name '" + name +
                       "' (must match [a-zA-Z_:][a-zA-Z0-9_:]* without a '__' prefix)");
  }
  if (help.find_first_of("\\\n") != std::string::npos) {
    throw MetricsError(where + "help text may not contain '\\' or a newline");
  }
  try {
    return builder.Name(name).Help(help).Labels(const_labels_).Register(*registry_);
  } catch (const std::invalid_argument& e) {
    // prometheus-cpp's messages do not say which metric ("Family name already exists
    // with different type").
    throw MetricsError(where + e.what());
  }
}

Family<Counter>& Families::AddCounter(const std::string& name, const std::string& help) {
  return Add(prometheus::BuildCounter(), name, help);
}

Family<Gauge>& Families::AddGauge(const std::string& name, const std::string& help) {
  return Add(prometheus::BuildGauge(), name, help);
}

Family<Histogram>& Families::AddHistogram(const std::string& name, const std::string& help) {
  return Add(prometheus::BuildHistogram(), name, help);
}

std::string Families::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace ringpilot::metrics
