#include "metrics/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace ringpilot::metrics {
namespace {

// Fields 3.. of /proc/PID/stat (field 2, the command, is in parentheses and may hold
// spaces, so the split starts after its last ')'); empty when unreadable.
std::vector<std::string> StatFields(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return {};
  const auto comm_end = line.rfind(')');
  if (comm_end == std::string::npos || comm_end + 2 > line.size()) return {};
  std::istringstream fields(line.substr(comm_end + 2));
  std::vector<std::string> out;
  for (std::string f; fields >> f;) out.push_back(f);
  return out;
}

// Field `n` (1-based, as proc(5) numbers them) of the split above, or -1.
double StatField(const std::vector<std::string>& fields, std::size_t n) {
  if (n < 3 || n - 3 >= fields.size()) return -1;
  return std::strtod(fields[n - 3].c_str(), nullptr);
}

double BootTime(const std::string& proc) {
  std::ifstream in(proc + "/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) return std::strtod(line.c_str() + 6, nullptr);
  }
  return -1;
}

double OpenFds(const std::string& proc, const std::string& process) {
  DIR* dir = ::opendir((proc + "/" + process + "/fd").c_str());
  if (dir == nullptr) return -1;
  // In the real /proc, the descriptor opendir holds is listed too and is not counted.
  const std::string own = proc == "/proc" && process == "self" ? std::to_string(::dirfd(dir)) : "";
  double n = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.' && own != e->d_name) ++n;
  }
  ::closedir(dir);
  return n;
}

double MaxFds(const std::string& proc, const std::string& process) {
  std::ifstream in(proc + "/" + process + "/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream words(line.substr(14));
    std::string soft;
    words >> soft;
    if (soft == "unlimited") return -1;
    return std::strtod(soft.c_str(), nullptr);
  }
  return -1;
}

}  // namespace

ProcessReading ReadProcess(const std::string& proc, const std::string& process) {
  ProcessReading r;
  const std::vector<std::string> stat = StatFields(proc + "/" + process + "/stat");
  const long ticks = ::sysconf(_SC_CLK_TCK);
  const long page = ::sysconf(_SC_PAGESIZE);
  const double utime = StatField(stat, 14), stime = StatField(stat, 15);
  if (utime >= 0 && stime >= 0 && ticks > 0) r.cpu_seconds = (utime + stime) / ticks;
  const double vsize = StatField(stat, 23), rss = StatField(stat, 24);
  if (vsize >= 0) r.virtual_memory_bytes = vsize;
  if (rss >= 0 && page > 0) r.resident_memory_bytes = rss * page;
  const double start_ticks = StatField(stat, 22);
  const double btime = BootTime(proc);
  if (start_ticks >= 0 && btime > 0 && ticks > 0)
    r.start_time_seconds = btime + start_ticks / ticks;
  r.open_fds = OpenFds(proc, process);
  r.max_fds = MaxFds(proc, process);
  return r;
}

ProcessMetrics::ProcessMetrics(Families& families, std::string proc, std::string process)
    : proc_(std::move(proc)), process_(std::move(process)) {
  cpu_ = &families
              .AddCounter("process_cpu_seconds_total",
                          "Total user and system CPU time spent in seconds.")
              .Add({});
  resident_ =
      &families.AddGauge("process_resident_memory_bytes", "Resident memory size in bytes.").Add({});
  virtual_ =
      &families.AddGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.").Add({});
  start_ = &families
                .AddGauge("process_start_time_seconds",
                          "Start time of the process since unix epoch in seconds.")
                .Add({});
  open_fds_ = &families.AddGauge("process_open_fds", "Number of open file descriptors.").Add({});
  max_fds_ =
      &families.AddGauge("process_max_fds", "Maximum number of open file descriptors.").Add({});
  Update();
}

void ProcessMetrics::Update() {
  const ProcessReading r = ReadProcess(proc_, process_);
  if (r.cpu_seconds > cpu_counted_) {
    cpu_->Increment(r.cpu_seconds - cpu_counted_);
    cpu_counted_ = r.cpu_seconds;
  }
  if (r.resident_memory_bytes >= 0) resident_->Set(r.resident_memory_bytes);
  if (r.virtual_memory_bytes >= 0) virtual_->Set(r.virtual_memory_bytes);
  if (r.start_time_seconds >= 0) start_->Set(r.start_time_seconds);
  if (r.open_fds >= 0) open_fds_->Set(r.open_fds);
  if (r.max_fds >= 0) max_fds_->Set(r.max_fds);
}

}  // namespace ringpilot::metrics
