// libringpilot-nccl-profiler.so as NCCL sees it: dlopen, look up ncclProfiler_vN, call
// init/startEvent/recordEventState/stopEvent/finalize with NCCL's event sequences, then
// scrape the rank's port over HTTP and read the stats file. Each test loads its own copy of
// the library (a copy under another name is a separate instance with its own state), since
// the plugin reads its environment once, at its first communicator.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nccl_profiler/profiler_abi.h"
#include "tests/test_util.h"

namespace ringpilot::nccl_profiler {
namespace {

namespace abi = ringpilot::nccl_profiler::abi;
using ringpilot::testing::TempDir;

constexpr uint64_t kWorld = 0x0123456789abcdefull;
constexpr uint64_t kOther = 0x00000000000000ffull;

// ---- HTTP: one GET with Connection: close, read to EOF ----
std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "<connect failed>";
  }
  const std::string request =
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    close(fd);
    return "<send failed>";
  }
  std::string raw;
  char buf[8192];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) raw.append(buf, static_cast<size_t>(n));
  close(fd);
  const auto body = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 200", 0) != 0 || body == std::string::npos) return "<bad: " + raw + ">";
  return raw.substr(body + 4);
}

// The value of the first series named `name` whose labels end with `labels_suffix`
// (constant labels come first, each group sorted by name), or -1.
double Series(const std::string& text, const std::string& name, const std::string& labels_suffix) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    const auto close = line.rfind("} ");
    if (line.rfind(name + "{", 0) == 0 && close != std::string::npos &&
        close >= labels_suffix.size() &&
        line.compare(close - labels_suffix.size(), labels_suffix.size(), labels_suffix) == 0) {
      return std::stod(line.substr(close + 2));
    }
    start = end + 1;
  }
  return -1;
}

// ---- the library ----
class Plugin {
 public:
  explicit Plugin(const TempDir& dir) : Plugin(dir.path()) {}
  explicit Plugin(const std::string& dir) {
    static int copies = 0;
    path_ = dir + "/libringpilot-nccl-profiler-" + std::to_string(++copies) + ".so";
    std::filesystem::copy_file(RINGPILOT_NCCL_PROFILER_SO, path_);
    lib_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(lib_, nullptr) << dlerror();
  }
  template <class T>
  T* Table(const char* name) {
    return lib_ ? static_cast<T*>(dlsym(lib_, name)) : nullptr;
  }
  abi::ProfilerV5& v5() { return *Table<abi::ProfilerV5>("ncclProfiler_v5"); }

 private:
  std::string path_;
  void* lib_ = nullptr;
};

// The variables the plugin reads, set for one test.
class ScopedEnv {
  static constexpr const char* kVars[] = {"RINGPILOT_METRICS_PORT",
                                          "RINGPILOT_METRICS_PORT_BASE",
                                          "RINGPILOT_METRICS_BIND",
                                          "RINGPILOT_RUN_DIR",
                                          "RANK",
                                          "LOCAL_RANK",
                                          "RINGPILOT_JOB_NAME"};

 public:
  explicit ScopedEnv(std::initializer_list<std::pair<std::string, std::string>> vars) {
    for (const char* name : kVars) unsetenv(name);
    for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const char* name : kVars) unsetenv(name);
  }
};

// Captures what is written to fd 2 while alive.
class StderrCapture {
 public:
  explicit StderrCapture(const TempDir& dir) : path_(dir.path() + "/stderr") {
    fflush(stderr);
    saved_ = dup(2);
    const int fd = open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    dup2(fd, 2);
    close(fd);
  }
  std::string Stop() {
    fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    return ringpilot::testing::ReadFile(path_);
  }

 private:
  std::string path_;
  int saved_;
};

// One v5 communicator as NCCL drives it.
struct Comm {
  abi::ProfilerV5* p;
  void* ctx = nullptr;
  int mask = -1;

  Comm(abi::ProfilerV5& table, uint64_t hash, int rank, int nranks, const char* name = "")
      : p(&table) {
    EXPECT_EQ(p->init(&ctx, hash, &mask, name, 1, nranks, rank, nullptr), abi::kSuccess);
  }

  // ncclAllReduce etc.: the API event, the task event (enqueue), its stop; returns the task
  // handle, to which kernel channels report.
  void* Enqueue(const char* func, size_t count, const char* type, int channels,
                bool captured = false) {
    abi::EventDescrV5 api{};
    api.type = abi::kCollApi;
    api.collApi.func = func;
    api.collApi.graphCaptured = captured;
    void* api_handle = nullptr;
    p->startEvent(ctx, &api_handle, &api);
    abi::EventDescrV5 d{};
    d.type = abi::kColl;
    d.parentObj = api_handle;
    d.coll.func = func;
    d.coll.count = count;
    d.coll.datatype = type;
    d.coll.nChannels = static_cast<uint8_t>(channels);
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    void* task = nullptr;
    p->startEvent(ctx, &task, &d);
    p->stopEvent(task);
    p->stopEvent(api_handle);
    return task;
  }
  void* EnqueueP2p(const char* func, size_t count, int peer) {
    abi::EventDescrV5 d{};
    d.type = abi::kP2p;
    d.p2p.func = func;
    d.p2p.count = count;
    d.p2p.datatype = "ncclInt8";
    d.p2p.peer = peer;
    d.p2p.nChannels = 1;
    void* task = nullptr;
    p->startEvent(ctx, &task, &d);
    p->stopEvent(task);
    return task;
  }
  // The proxy thread: kernel channel start (GPU timestamp), its stop timestamp, stop.
  void Channel(void* task, uint64_t gpu_start, uint64_t gpu_stop) {
    abi::EventDescrV5 d{};
    d.type = abi::kKernelCh;
    d.parentObj = task;
    d.kernelCh.pTimer = gpu_start;
    void* ch = nullptr;
    p->startEvent(ctx, &ch, &d);
    abi::EventStateArgsV4 args{};
    args.kernelCh.pTimer = gpu_stop;
    p->recordEventState(ch, abi::kKernelChStop, &args);
    p->stopEvent(ch);
  }
};

TEST(NcclProfilerPlugin, ExportsEveryVersionNcclLooksUpAndNoOther) {
  TempDir dir;
  Plugin plugin(dir);
  for (const char* name :
       {"ncclProfiler_v5", "ncclProfiler_v4", "ncclProfiler_v3", "ncclProfiler_v2"}) {
    auto* table = plugin.Table<abi::ProfilerV2>(name);
    ASSERT_NE(table, nullptr) << name;
    EXPECT_STREQ(table->name, "ringpilot");
  }
  // NCCL tries v6 first; a v6 symbol would make it call us with v6 descriptors.
  EXPECT_EQ(plugin.Table<void>("ncclProfiler_v6"), nullptr);
  EXPECT_EQ(plugin.Table<void>("ncclProfiler_v1"), nullptr);
}

TEST(NcclProfilerPlugin, CollectivesAndP2pOnTwoCommunicatorsAreServedLive) {
  TempDir dir;
  const int port = ringpilot::testing::FreeLoopbackPorts(1);
  ASSERT_NE(port, 0);
  // As `ringpilot exec` sets it up: the base, and the process's own LOCAL_RANK.
  ScopedEnv env({{"RINGPILOT_METRICS_PORT_BASE", std::to_string(port - 1)},
                 {"RANK", "5"},
                 {"LOCAL_RANK", "1"},
                 {"RINGPILOT_JOB_NAME", "ddp"}});
  Plugin plugin(dir);
  Comm world(plugin.v5(), kWorld, 5, 8, "world");
  EXPECT_NE(world.ctx, nullptr);
  EXPECT_EQ(world.mask, abi::kColl | abi::kP2p | abi::kKernelCh | abi::kCollApi | abi::kP2pApi);
  Comm pair(plugin.v5(), kOther, 0, 2);

  // Two 25 MiB fp32 all-reduces on 2 channels: 1 ms of GPU time each.
  for (int i = 0; i < 2; ++i) {
    void* t = world.Enqueue("AllReduce", 25 << 18, "ncclFloat32", 2);
    world.Channel(t, 1'000'000, 1'900'000);
    world.Channel(t, 1'050'000, 2'000'000);
  }
  // A send on the other communicator; a graph-captured op is left out.
  pair.Channel(pair.EnqueueP2p("Send", 4096, 1), 0, 4096);
  void* captured = world.Enqueue("AllReduce", 100, "ncclFloat32", 1, /*captured=*/true);
  EXPECT_EQ(captured, nullptr);

  const std::string text = Scrape(port);
  auto series = [&](const std::string& name, const std::string& labels) {
    return Series(text, name, labels);
  };
  // The rank labels first (sorted: upper case first), then the series' own (sorted); the
  // job is named once, by ringpilot_job_info.
  const std::string w = "comm=\"0123456789abcdef\"";
  EXPECT_NE(text.find("ringpilot_nccl_ops_total{Hostname=\""), std::string::npos) << text;
  EXPECT_NE(text.find("\",local_rank=\"1\",rank=\"5\",algo="), std::string::npos) << text;
  EXPECT_EQ(text.find("job=\""), std::string::npos) << "no job label: Prometheus owns it";
  EXPECT_EQ(series("ringpilot_job_info", "name=\"ddp\""), 1.0) << text;
  const std::string cell =
      "algo=\"ring\"," + w + ",op=\"allreduce\",proto=\"simple\",size_bucket=\"16MiB-64MiB\"";
  EXPECT_EQ(series("ringpilot_nccl_ops_total", cell), 2.0) << text;
  EXPECT_EQ(series("ringpilot_nccl_bytes_total", cell), 2.0 * 25 * (1 << 20));
  EXPECT_NEAR(series("ringpilot_nccl_seconds_total", cell), 2e-3, 1e-12);
  EXPECT_EQ(series("ringpilot_collective_bytes_total", w + ",op=\"allreduce\""),
            2.0 * 25 * (1 << 20));
  // 25 MiB in 1 ms on 8 ranks: 26.2144e9 B/s * 2*7/8.
  EXPECT_NEAR(
      series("ringpilot_collective_bus_bandwidth_bytes_per_second", w + ",op=\"allreduce\""),
      25.0 * (1 << 20) / 1e-3 * 1.75, 1.0);
  EXPECT_NEAR(series("ringpilot_nccl_bus_bandwidth_bytes_per_second", cell),
              25.0 * (1 << 20) / 1e-3 * 1.75, 1.0);
  // The trainer's histogram: by op (size classes are in ringpilot_nccl_*), its buckets.
  const std::string hist = w + ",op=\"allreduce\"";
  EXPECT_EQ(series("ringpilot_collective_seconds_count", hist), 2.0);
  EXPECT_NEAR(series("ringpilot_collective_seconds_sum", hist), 2e-3, 1e-12);
  EXPECT_EQ(series("ringpilot_collective_seconds_bucket", hist + ",le=\"0.0005\""), 0.0);
  EXPECT_EQ(series("ringpilot_collective_seconds_bucket", hist + ",le=\"0.0025\""), 2.0);
  EXPECT_EQ(series("ringpilot_collective_seconds_bucket", hist + ",le=\"+Inf\""), 2.0);
  EXPECT_EQ(series("ringpilot_collective_last_started_seq", w), 2.0);
  EXPECT_EQ(series("ringpilot_collective_last_completed_seq", w), 2.0);
  EXPECT_EQ(series("ringpilot_nccl_inflight_ops", w), 0.0);
  const std::string other = "comm=\"00000000000000ff\"";
  EXPECT_EQ(series("ringpilot_nccl_p2p_last_completed_seq", other), 1.0) << text;
  EXPECT_EQ(
      series("ringpilot_nccl_ops_total",
             "algo=\"none\"," + other + ",op=\"send\",proto=\"none\",size_bucket=\"lt64KiB\""),
      1.0);
  EXPECT_EQ(
      series("ringpilot_nccl_communicator_info",
             "api_version=\"5\"," + w +
                 ",comm_rank=\"5\",comm_size=\"8\",name=\"world\",nodes=\"1\",timing=\"gpu\""),
      1.0)
      << text;

  // The client libraries' process series, read from /proc.
  const double started = series("process_start_time_seconds", "rank=\"5\"");
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(started, now + 1);
  EXPECT_GT(started, now - 3600) << "the test process started within the hour";
  EXPECT_GT(series("process_resident_memory_bytes", "rank=\"5\""), 1e6);
  EXPECT_GT(series("process_open_fds", "rank=\"5\""), 2.0);
  EXPECT_GE(series("process_cpu_seconds_total", "rank=\"5\""), 0.0);

  // Live: one more all-reduce shows on the next scrape.
  void* t = world.Enqueue("AllReduce", 25 << 18, "ncclFloat32", 1);
  world.Channel(t, 0, 1'000'000);
  EXPECT_EQ(Series(Scrape(port), "ringpilot_nccl_ops_total", cell), 3.0);
  EXPECT_EQ(Series(Scrape(port), "ringpilot_collective_last_completed_seq", w), 3.0);
  world.p->finalize(world.ctx);
  pair.p->finalize(pair.ctx);
  // Finalized communicators keep their final numbers.
  EXPECT_EQ(Series(Scrape(port), "ringpilot_nccl_ops_total", cell), 3.0);
}

TEST(NcclProfilerPlugin, OpBandwidthIsTheClassCarryingTheMostBytesNotAOneOffLargeOperation) {
  TempDir dir;
  const int port = ringpilot::testing::FreeLoopbackPorts(1);
  ASSERT_NE(port, 0);
  ScopedEnv env(
      {{"RINGPILOT_METRICS_PORT_BASE", std::to_string(port)}, {"RANK", "0"}, {"LOCAL_RANK", "0"}});
  Plugin plugin(dir);
  Comm world(plugin.v5(), kWorld, 0, 2, "world");
  // As DDP's first step: all 128 MiB of gradients in one all-reduce, 100 ms while the peer
  // arrives; then steady 32 MiB buckets, 0.2 ms each, 5 of them (160 MiB).
  void* first = world.Enqueue("AllReduce", 32 << 20, "ncclFloat32", 1);
  world.Channel(first, 1'000'000, 101'000'000);
  for (int i = 0; i < 5; ++i) {
    void* t = world.Enqueue("AllReduce", 8 << 20, "ncclFloat32", 1);
    world.Channel(t, 200'000'000, 200'200'000);
  }
  const std::string text = Scrape(port);
  const std::string w = "comm=\"0123456789abcdef\"";
  // 2 ranks: factor 1. The steady class: 32 MiB in 0.2 ms.
  EXPECT_NEAR(
      Series(text, "ringpilot_collective_bus_bandwidth_bytes_per_second", w + ",op=\"allreduce\""),
      32.0 * (1 << 20) / 2e-4, 1.0)
      << text;
  // The one-off keeps its own cell.
  EXPECT_NEAR(
      Series(text, "ringpilot_nccl_bus_bandwidth_bytes_per_second",
             "algo=\"ring\"," + w + ",op=\"allreduce\",proto=\"simple\",size_bucket=\"ge64MiB\""),
      128.0 * (1 << 20) / 0.1, 1.0);
}

TEST(NcclProfilerPlugin, StoppedRankShowsItsInFlightOperationOnTheScrapeAndInTheStatsFile) {
  TempDir dir;
  const int port = ringpilot::testing::FreeLoopbackPorts(1);
  ASSERT_NE(port, 0);
  ScopedEnv env({{"RINGPILOT_METRICS_PORT", std::to_string(port)},
                 {"RINGPILOT_RUN_DIR", dir.path()},
                 {"RANK", "2"}});
  Plugin plugin(dir);
  Comm world(plugin.v5(), kWorld, 2, 4);
  for (int i = 0; i < 6; ++i)
    world.Channel(world.Enqueue("AllReduce", 1024, "ncclBfloat16", 1), 0, 10);
  world.Enqueue("AllGather", 1024, "ncclBfloat16", 1);  // the peers never come
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::string text = Scrape(port);
  const std::string w = "comm=\"0123456789abcdef\"";
  EXPECT_EQ(Series(text, "ringpilot_collective_last_started_seq", w), 7.0) << text;
  EXPECT_EQ(Series(text, "ringpilot_collective_last_completed_seq", w), 6.0);
  EXPECT_EQ(Series(text, "ringpilot_nccl_inflight_ops", w), 1.0);
  EXPECT_EQ(Series(text, "ringpilot_nccl_oldest_inflight_seq", w), 7.0);
  EXPECT_GE(Series(text, "ringpilot_nccl_oldest_inflight_seconds", w + ",op=\"allgather\""), 0.04);
  EXPECT_GT(Series(text, "ringpilot_nccl_oldest_inflight_start_time_seconds", w), 1.7e9);
  // The process lists itself for Prometheus' file_sd (no MPI to gather the ranks).
  const nlohmann::json targets = nlohmann::json::parse(
      ringpilot::testing::ReadFile(dir.path() + "/prometheus-targets-rank-2.json"));
  ASSERT_EQ(targets.size(), 1u) << targets.dump();
  EXPECT_EQ(targets[0]["targets"], nlohmann::json::array({"127.0.0.1:" + std::to_string(port)}));
  EXPECT_EQ(targets[0]["labels"]["ringpilot_job"], "exec");

  world.p->finalize(world.ctx);  // abort: the all-gather never completed
  const nlohmann::json j =
      nlohmann::json::parse(ringpilot::testing::ReadFile(dir.path() + "/logs/rank-2.nccl.json"));
  EXPECT_EQ(j["rank"], 2);
  EXPECT_EQ(j["profiler_api_version"], 5);
  ASSERT_EQ(j["communicators"].size(), 1u);
  const auto& c = j["communicators"][0];
  EXPECT_EQ(c["comm"], "0123456789abcdef");
  EXPECT_EQ(c["comm_size"], 4);
  EXPECT_EQ(c["collective_seq"]["started"], 7);
  EXPECT_EQ(c["collective_seq"]["completed"], 6);
  EXPECT_EQ(c["finalized"], true);
  EXPECT_EQ(c["abandoned_ops"], 1);
  // What it was stuck in at the abort. (Its channels gave no GPU start: no timed rows.)
  EXPECT_EQ(c["abandoned_oldest"]["op"], "allgather");
  EXPECT_EQ(c["abandoned_oldest"]["seq"], 7);
  EXPECT_GE(c["abandoned_oldest"]["age_seconds"], 0.04);
  EXPECT_TRUE(c["recent_collectives"].empty());
  EXPECT_GT(c["init_unix"].get<double>(), 1.7e9);
  EXPECT_GE(j["written_unix"].get<double>(), c["init_unix"].get<double>());
  ASSERT_EQ(c["operations"].size(), 1u);
  EXPECT_EQ(c["operations"][0]["op"], "allreduce");
  EXPECT_EQ(c["operations"][0]["count"], 6);
  EXPECT_EQ(c["operations"][0]["bytes_total"], 6 * 2048);
}

TEST(NcclProfilerPlugin, PortInUseDisablesThePluginWithOneLineAndNcclCarriesOn) {
  TempDir dir;
  const int busy = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(busy, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(busy, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(busy, reinterpret_cast<sockaddr*>(&addr), &len);
  ScopedEnv env({{"RINGPILOT_METRICS_PORT", std::to_string(ntohs(addr.sin_port))}});
  Plugin plugin(dir);
  StderrCapture err(dir);
  Comm first(plugin.v5(), kWorld, 0, 2);
  Comm second(plugin.v5(), kOther, 0, 2);
  // Events NCCL may still send with the null context, and a finalize: no effect, no crash.
  void* t = first.Enqueue("AllReduce", 10, "ncclFloat32", 1);
  first.Channel(t, 0, 1);
  first.p->finalize(first.ctx);
  const std::string log = err.Stop();
  close(busy);
  EXPECT_EQ(first.ctx, nullptr);
  EXPECT_EQ(first.mask, 0);
  EXPECT_EQ(second.ctx, nullptr);
  EXPECT_EQ(second.mask, 0);
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(log,
            "ringpilot-nccl-profiler: disabled: metrics exporter: cannot listen on 127.0.0.1:" +
                std::to_string(ntohs(addr.sin_port)) + ": Address already in use\n");
}

TEST(NcclProfilerPlugin, BadEnvironmentDisablesWithOneLine) {
  TempDir dir;
  ScopedEnv env({{"RINGPILOT_METRICS_PORT", "ninety"}});
  Plugin plugin(dir);
  StderrCapture err(dir);
  Comm c(plugin.v5(), kWorld, 0, 2);
  Comm d(plugin.v5(), kOther, 0, 2);
  const std::string log = err.Stop();
  EXPECT_EQ(c.ctx, nullptr);
  EXPECT_EQ(c.mask, 0);
  EXPECT_EQ(log,
            "ringpilot-nccl-profiler: disabled: RINGPILOT_METRICS_PORT='ninety' is not a number "
            "in 0..65535\n");
}

TEST(NcclProfilerPlugin, ApiMismatchAtInitDisablesWithOneLine) {
  TempDir dir;
  ScopedEnv env({{"RINGPILOT_RUN_DIR", dir.path()}});
  Plugin plugin(dir);
  StderrCapture err(dir);
  // v4's argument order given to v5's init: the rank lands where the size should be.
  Comm c(plugin.v5(), kWorld, /*rank=*/3, /*nranks=*/2);
  const std::string log = err.Stop();
  EXPECT_EQ(c.ctx, nullptr);
  EXPECT_EQ(c.mask, 0);
  EXPECT_EQ(log,
            "ringpilot-nccl-profiler: disabled: profiler API v5 init got rank 3 of 2 ranks: NCCL "
            "and this plugin disagree on the API\n");
}

TEST(NcclProfilerPlugin, Version4AndVersion2TablesCount) {
  TempDir dir;
  ScopedEnv env({{"RINGPILOT_RUN_DIR", dir.path()}, {"RANK", "0"}});
  Plugin plugin(dir);
  auto& v4 = *plugin.Table<abi::ProfilerV4>("ncclProfiler_v4");
  void* ctx4 = nullptr;
  int mask = 0;
  v4.init(&ctx4, &mask, "c4", kWorld, 1, 2, 1, nullptr);
  EXPECT_EQ(mask, abi::kColl | abi::kP2p | abi::kKernelCh);
  abi::EventDescrV4 d4{};
  d4.type = abi::kColl;
  d4.coll.func = "ReduceScatter";
  d4.coll.count = 1000;
  d4.coll.datatype = "ncclFloat16";
  d4.coll.nChannels = 1;
  d4.coll.algo = "RING";
  d4.coll.proto = "LL";
  void* task = nullptr;
  v4.startEvent(ctx4, &task, &d4);
  v4.stopEvent(task);
  abi::EventDescrV4 ch{};
  ch.type = abi::kKernelCh;
  ch.parentObj = task;
  ch.kernelCh.pTimer = 100;
  void* chh = nullptr;
  v4.startEvent(ctx4, &chh, &ch);
  abi::EventStateArgsV4 args{};
  args.kernelCh.pTimer = 2100;
  v4.recordEventState(chh, abi::kKernelChStop, &args);
  v4.stopEvent(chh);
  v4.finalize(ctx4);

  auto& v2 = *plugin.Table<abi::ProfilerV2>("ncclProfiler_v2");
  void* ctx2 = nullptr;
  v2.init(&ctx2, &mask);
  EXPECT_EQ(mask, abi::kColl | abi::kP2p);
  abi::EventDescrV2 d2{};
  d2.type = abi::kColl;
  d2.rank = 0;
  d2.coll.commHash = kOther;
  d2.coll.func = "Broadcast";
  d2.coll.count = 4096;
  d2.coll.datatype = "ncclInt8";
  void* task2 = nullptr;
  v2.startEvent(ctx2, &task2, &d2);
  EXPECT_NE(task2, nullptr);
  v2.stopEvent(task2);
  v2.finalize(ctx2);

  const nlohmann::json j =
      nlohmann::json::parse(ringpilot::testing::ReadFile(dir.path() + "/logs/rank-0.nccl.json"));
  ASSERT_EQ(j["communicators"].size(), 2u) << j.dump(2);
  const auto& c4 = j["communicators"][0];
  EXPECT_EQ(c4["comm"], "0123456789abcdef");
  EXPECT_EQ(c4["timing"], "gpu");
  EXPECT_EQ(c4["operations"][0]["op"], "reduce_scatter");
  EXPECT_EQ(c4["operations"][0]["bytes_total"], 2000 * 2);  // the whole buffer: x nranks
  EXPECT_DOUBLE_EQ(c4["operations"][0]["seconds_total"].get<double>(), 2e-6);
  const auto& c2 = j["communicators"][1];
  EXPECT_EQ(c2["comm"], "00000000000000ff");
  EXPECT_EQ(c2["timing"], "none");
  EXPECT_EQ(c2["operations"][0]["op"], "broadcast");
  EXPECT_EQ(c2["operations"][0]["count"], 1);
  EXPECT_EQ(c2["operations"][0]["timed_count"], 0);
}

// PyTorch programs often exit without destroying their communicators: NCCL's threads are
// still there and no finalize comes. The process must exit with its own status, and the
// stats file must hold what happened (written at exit).
TEST(NcclProfilerPluginDeathTest, ExitWithoutFinalizeIsCleanAndLeavesTheStatsFile) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, not a fork
  // The child re-runs this test from the start: it takes the parent's directory.
  std::unique_ptr<TempDir> own;
  const char* inherited = std::getenv("RINGPILOT_TEST_EXIT_DIR");
  std::string dir = inherited ? inherited : "";
  if (dir.empty()) {
    own = std::make_unique<TempDir>();
    dir = own->path();
    setenv("RINGPILOT_TEST_EXIT_DIR", dir.c_str(), 1);
  }
  EXPECT_EXIT(
      {
        ScopedEnv env(
            {{"RINGPILOT_RUN_DIR", dir}, {"RANK", "4"}, {"RINGPILOT_METRICS_PORT_BASE", "0"}});
        Plugin plugin(dir);
        Comm world(plugin.v5(), kWorld, 0, 2);
        world.Channel(world.Enqueue("AllReduce", 1 << 20, "ncclFloat32", 1), 100, 200);
        world.Enqueue("AllReduce", 1 << 20, "ncclFloat32", 1);  // still in flight at exit
        std::exit(3);
      },
      ::testing::ExitedWithCode(3),
      ::testing::Not(::testing::HasSubstr("ringpilot-nccl-profiler")));
  unsetenv("RINGPILOT_TEST_EXIT_DIR");
  // A normal exit withdraws the process's scrape target.
  EXPECT_EQ(ringpilot::testing::ReadFile(dir + "/prometheus-targets-rank-4.json"), "[]\n");
  const nlohmann::json j =
      nlohmann::json::parse(ringpilot::testing::ReadFile(dir + "/logs/rank-4.nccl.json"));
  ASSERT_EQ(j["communicators"].size(), 1u) << j.dump(2);
  const auto& c = j["communicators"][0];
  EXPECT_EQ(c["finalized"], false);
  EXPECT_EQ(c["collective_seq"]["started"], 2);
  EXPECT_EQ(c["collective_seq"]["completed"], 1);
  EXPECT_EQ(c["in_flight"], 1);
  EXPECT_EQ(c["oldest_in_flight"]["seq"], 2);
  EXPECT_EQ(c["operations"][0]["count"], 1);
}

}  // namespace
}  // namespace ringpilot::nccl_profiler
