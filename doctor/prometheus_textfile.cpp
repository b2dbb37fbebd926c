// `ringpilot doctor --prometheus FILE`: the results as Prometheus text for node_exporter's
// textfile collector (prometheus::TextSerializer), written atomically.
#include <string>
#include <utility>
#include <vector>

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>
#include <prometheus/text_serializer.h>

#include "base/files.h"
#include "doctor/doctor.h"

namespace ringpilot::doctor {
namespace {

constexpr CheckStatus kStatuses[] = {CheckStatus::kPass, CheckStatus::kWarn, CheckStatus::kFail,
                                     CheckStatus::kSkip};

prometheus::MetricFamily Gauges(std::string name, std::string help) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = prometheus::MetricType::Gauge;
  return family;
}

// One sample; labels in the order given (`node` first where there is one).
void AddGauge(prometheus::MetricFamily& family, const NodeChecks& n,
              std::vector<std::pair<std::string, std::string>> labels, double value) {
  prometheus::ClientMetric metric;
  if (!n.node.empty()) metric.label.push_back({"node", n.node});
  for (auto& [name, label_value] : labels) {
    metric.label.push_back({std::move(name), std::move(label_value)});
  }
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

std::string DoctorPrometheus(const std::vector<NodeChecks>& nodes, double unix_time) {
  prometheus::MetricFamily status =
      Gauges("ringpilot_doctor_check_status",
             "Result of each ringpilot doctor check: 1 for the status it ended with, 0 for the "
             "other statuses.");
  prometheus::MetricFamily counts =
      Gauges("ringpilot_doctor_checks",
             "Number of ringpilot doctor checks that ended with each status in the last run.");
  prometheus::MetricFamily last_run =
      Gauges("ringpilot_doctor_last_run_timestamp_seconds",
             "Unix time at which the last ringpilot doctor run finished.");
  for (const NodeChecks& n : nodes) {
    for (const CheckResult& c : n.checks) {
      for (const CheckStatus s : kStatuses) {
        AddGauge(status, n, {{"check", c.name}, {"status", ToString(s)}}, c.status == s ? 1 : 0);
      }
    }
  }
  for (const NodeChecks& n : nodes) {
    for (const CheckStatus s : kStatuses) {
      int count = 0;
      for (const CheckResult& c : n.checks) count += c.status == s ? 1 : 0;
      AddGauge(counts, n, {{"status", ToString(s)}}, count);
    }
  }
  AddGauge(last_run, NodeChecks{}, {}, unix_time);
  // Always all three families, even with no checks: the HELP and TYPE lines say what the
  // file is for.
  return prometheus::TextSerializer().Serialize({status, counts, last_run});
}

void WriteDoctorFile(const std::string& path, const std::string& text) {
  base::WriteFileAtomically(path, text);  // base::FileError names PATH
}

}  // namespace ringpilot::doctor
