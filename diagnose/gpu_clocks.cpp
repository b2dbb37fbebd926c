// What held the GPUs' clocks down over the timed steps (see diagnose.h): the ranks'
// gpu_clocks (history::GpuClocks, NVML read when the timed steps began and at the record).
#include <algorithm>
#include <optional>
#include <sstream>

#include "diagnose/diagnose.h"
#include "diagnose/report_format.h"

namespace ringpilot::diagnose {
using detail::Fmt;
using nlohmann::json;

namespace {

// Ranks named one by one in a warning; the rest are counted.
constexpr std::size_t kNamedRanks = 4;

struct Limit {
  const char* cause;
  std::optional<double> history::GpuClocks::*seconds;
  const char* advice;
  const char* advice_several_gpus;  ///< appended when the run had more than one rank
};

const Limit kLimits[] = {
    {"power", &history::GpuClocks::power_limited_seconds,
     "every step runs at the clock the board's power budget allows; "
     "`nvidia-smi -q -d POWER,PERFORMANCE` shows the limit",
     "; NCCL's kernels beside backward draw from the same budget, so a step on several GPUs "
     "runs at a lower clock than on one"},
    {"thermal", &history::GpuClocks::thermal_limited_seconds,
     "the GPU is too hot to hold its clock: check its cooling (airflow, fans, inlet "
     "temperature; `nvidia-smi -q -d TEMPERATURE,PERFORMANCE`)",
     ""},
};

// The limited share of the window, in [0, 1]; none without a window or a count.
std::optional<double> Share(const history::GpuClocks& g, const std::optional<double>& limited) {
  if (!limited || g.seconds <= 0) return std::nullopt;
  return std::clamp(*limited / g.seconds, 0.0, 1.0);
}

std::string Mhz(const std::optional<double>& v) { return v ? Fmt(*v, 0) : "-"; }
std::string Watts(const std::optional<double>& v) { return v ? Fmt(*v, 1) : "-"; }
std::string Percent(const std::optional<double>& share) {
  return share ? Fmt(100 * *share, 1) + "%" : "-";
}

// "SM clock 1882 of 1980 MHz, mean power 693.1 of 700.0 W": what the rank's record has of the two
// (both means over the timed steps).
std::string ClockDetail(const history::GpuClocks& g) {
  std::string clock, power;
  if (g.sm_clock_mhz) {
    clock = "SM clock " + Fmt(*g.sm_clock_mhz, 0) +
            (g.sm_clock_max_mhz ? " of " + Fmt(*g.sm_clock_max_mhz, 0) : std::string()) + " MHz";
  }
  if (g.power_watts) {
    power = "mean power " + Fmt(*g.power_watts, 1) +
            (g.power_limit_watts ? " of " + Fmt(*g.power_limit_watts, 1) : std::string()) + " W";
  }
  if (clock.empty() || power.empty()) return clock + power;
  return clock + ", " + power;
}

}  // namespace

void AnalyzeGpuClocks(Diagnosis* d) {
  std::map<int, const RankStats*> by_rank;
  for (const RankStats& r : d->data.ranks) {
    if (r.gpu_clocks) by_rank[r.rank] = &r;
  }
  const bool several_ranks =
      d->data.ranks.size() > 1 || std::any_of(d->data.ranks.begin(), d->data.ranks.end(),
                                              [](const RankStats& r) { return r.world_size > 1; });
  for (const Limit& limit : kLimits) {
    std::vector<ClockLimitedRank> limited;
    for (const auto& [rank, r] : by_rank) {
      const std::optional<double> share = Share(*r->gpu_clocks, (*r->gpu_clocks).*limit.seconds);
      if (share && *share >= kClockLimitedShare) limited.push_back({rank, limit.cause, *share});
    }
    if (limited.empty()) continue;
    std::stable_sort(
        limited.begin(), limited.end(),
        [](const ClockLimitedRank& a, const ClockLimitedRank& b) { return a.share > b.share; });
    std::string text = std::string("GPU clocks held down by the ") + limit.cause + " limit: ";
    for (std::size_t i = 0; i < limited.size() && i < kNamedRanks; ++i) {
      const ClockLimitedRank& c = limited[i];
      const std::string detail = ClockDetail(*by_rank.at(c.rank)->gpu_clocks);
      text += (i ? ", rank " : "rank ") + std::to_string(c.rank) + " " + Fmt(100 * c.share, 1) +
              "%" + (i ? "" : " of its timed steps") + (detail.empty() ? "" : " (" + detail + ")");
    }
    if (limited.size() > kNamedRanks) {
      text += " and " + std::to_string(limited.size() - kNamedRanks) + " more rank(s)";
    }
    text += std::string(": ") + limit.advice;
    if (several_ranks) text += limit.advice_several_gpus;
    const bool straggler_among =
        d->straggler && std::any_of(limited.begin(), limited.end(), [&](const ClockLimitedRank& c) {
          return c.rank == d->straggler->rank;
        });
    if (straggler_among && limited.size() < d->data.ranks.size()) {
      text += "; rank " + std::to_string(d->straggler->rank) +
              ", the straggler, is among them: its clock sets the pace of every step";
    }
    d->warnings.push_back(text);
    d->clock_limited.insert(d->clock_limited.end(), limited.begin(), limited.end());
  }
}

std::string RenderGpuClocksText(const Diagnosis& d) {
  std::vector<std::vector<std::string>> rows = {
      {"rank", "sm_MHz", "max_MHz", "power_W", "limit_W", "power_limited", "thermal_limited"}};
  for (const RankStats& r : d.data.ranks) {
    if (!r.gpu_clocks) continue;
    const history::GpuClocks& g = *r.gpu_clocks;
    rows.push_back({std::to_string(r.rank), Mhz(g.sm_clock_mhz), Mhz(g.sm_clock_max_mhz),
                    Watts(g.power_watts), Watts(g.power_limit_watts),
                    Percent(Share(g, g.power_limited_seconds)),
                    Percent(Share(g, g.thermal_limited_seconds))});
  }
  if (rows.size() == 1) return "";
  std::ostringstream out;
  out << "\ngpu clocks over the timed steps (NVML):\n";
  detail::PrintTable(out, rows);
  out << "  (means over the timed steps, checkpoints and evaluations left out; limited = "
         "share of them the power or thermal limit held the clocks down)\n";
  return out.str();
}

json GpuClocksJson(const RankStats& r) {
  if (!r.gpu_clocks) return nullptr;
  const history::GpuClocks& g = *r.gpu_clocks;
  const auto value = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"seconds", g.seconds},
          {"power_limited_seconds", value(g.power_limited_seconds)},
          {"power_limited_share", value(Share(g, g.power_limited_seconds))},
          {"thermal_limited_seconds", value(g.thermal_limited_seconds)},
          {"thermal_limited_share", value(Share(g, g.thermal_limited_seconds))},
          {"sm_clock_mhz", value(g.sm_clock_mhz)},
          {"sm_clock_max_mhz", value(g.sm_clock_max_mhz)},
          {"power_watts", value(g.power_watts)},
          {"power_limit_watts", value(g.power_limit_watts)}};
}

}  // namespace ringpilot::diagnose
