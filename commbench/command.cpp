#include "commbench/command.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "base/shell.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "commbench/svg_plots.h"
#include "mpirun/cma_probe.h"
#include "mpirun/flags.h"
#include "topology/probe.h"

namespace ringpilot::commbench {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;
constexpr const char* kCommbenchName = "ringpilot-commbench";

std::string Pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string SelfDirectory() { return base::DirName(base::SelfExecutablePath()); }

// GPUs a CUDA job on this node can use: CUDA_VISIBLE_DEVICES when set, else NVML's count.
int VisibleGpus(const base::Environment& env) {
  const auto it = env.find("CUDA_VISIBLE_DEVICES");
  if (it != env.end()) {
    if (it->second.empty()) return 0;
    return static_cast<int>(std::count(it->second.begin(), it->second.end(), ',')) + 1;
  }
  return static_cast<int>(topology::ProbeNode().gpus.size());
}

// Runs argv with env, inheriting stdout and stderr; returns the exit status (128 + signal
// for a signal, 127 when it could not be executed).
int Spawn(const std::vector<std::string>& argv, const base::Environment& env) {
  base::SpawnOptions options;
  options.argv = argv;
  options.path = base::ResolveExecutable(argv.front(), base::Lookup(env, "PATH", ""));
  if (options.path.empty()) {
    throw std::runtime_error("'" + argv.front() + "' not found or not executable");
  }
  options.env = env;
  std::cout.flush();
  std::cerr.flush();
  const base::RunResult run = base::RunToEnd(options);
  return run.exec_errno != 0 ? base::kExitNotFound : run.status.ShellCode();
}

// Writes --plot's SVG; false (and the one-line error) when it cannot.
bool WritePlot(const BenchCommArgs& args, const std::string& svg_text, std::ostream& out,
               std::ostream& err) {
  std::ofstream svg(args.plot);
  svg << svg_text;
  if (!svg) {
    err << "ringpilot bench comm: cannot write " << args.plot << "\n";
    return false;
  }
  if (!args.json) out << "# plot written to " << args.plot << "\n";
  return true;
}

// Prints (and plots) a result document; the exit status of RunBenchComm.
int Report(const BenchCommArgs& args, const nlohmann::json& doc, const std::string& text,
           std::ostream& out, std::ostream& err) {
  // --json prints the document in its own key order.
  nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  const std::string setup =
      doc.value("device", std::string("?")) + ", " + std::to_string(args.np) + " ranks";
  if (args.pairwise) {
    const auto gbps = doc.at("pairwise").at("gbps").get<std::vector<std::vector<double>>>();
    const auto bytes = doc.at("pairwise").at("bytes").get<std::size_t>();
    if (args.json) {
      nlohmann::ordered_json slow = nlohmann::ordered_json::array();
      for (const auto& [s, d] : FindSlowPairs(gbps)) slow.push_back({{"src", s}, {"dst", d}});
      ordered["pairwise"]["slow_pairs"] = slow;
      out << ordered.dump(2) << "\n";
    } else {
      out << FormatPairwiseMatrix(gbps, bytes);
    }
    if (!args.plot.empty() &&
        !WritePlot(args,
                   RenderPairwiseSvg(gbps, bytes, "ringpilot bench comm --pairwise, " + setup), out,
                   err)) {
      return kExitFailure;
    }
    return kExitOk;
  }
  out << (args.json ? ordered.dump(2) + "\n" : FormatResultsTable(doc));
  if (!args.plot.empty() &&
      !WritePlot(args,
                 RenderBusBandwidthSvg(doc.at("results"), "ringpilot bench comm: busbw, " + setup),
                 out, err)) {
    return kExitFailure;
  }
  std::size_t wrong = 0;
  for (const nlohmann::json& r : doc.at("results")) wrong += r.at("wrong").get<std::size_t>();
  if (wrong > 0) {
    err << "ringpilot bench comm: " << wrong << " wrong elements: results are corrupt\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

std::size_t ParseByteSize(const std::string& text) {
  std::string t = text;
  if (!t.empty() && (t.back() == 'B' || t.back() == 'b')) t.pop_back();
  std::size_t mult = 1;
  if (!t.empty()) {
    switch (t.back()) {
      case 'K':
      case 'k':
        mult = std::size_t{1} << 10;
        break;
      case 'M':
      case 'm':
        mult = std::size_t{1} << 20;
        break;
      case 'G':
      case 'g':
        mult = std::size_t{1} << 30;
        break;
      default:
        break;
    }
    if (mult != 1) t.pop_back();
  }
  const bool digits = !t.empty() && t.size() <= 12 &&
                      std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  const std::size_t value = digits ? std::stoull(t) * mult : 0;
  if (value == 0) {
    throw std::invalid_argument("'" + text + "' is not a size (e.g. 4096, 64K, 1M, 1G)");
  }
  return value;
}

std::string FormatByteSize(std::size_t bytes) {
  const char* units[] = {"G", "M", "K"};
  const int shifts[] = {30, 20, 10};
  for (int i = 0; i < 3; ++i) {
    const std::size_t unit = std::size_t{1} << shifts[i];
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + units[i];
  }
  return std::to_string(bytes);
}

std::vector<std::string> BuildCommbenchArgv(const BenchCommArgs& args, const BenchContext& ctx) {
  if (args.np < 1) throw std::invalid_argument("--np must be at least 1");
  const std::size_t min_bytes = ParseByteSize(args.min_bytes);
  const std::size_t max_bytes = ParseByteSize(args.max_bytes);
  if (!args.pairwise && max_bytes < min_bytes) {
    throw std::invalid_argument("--max-bytes is below --min-bytes");
  }
  if (args.graphs > 0 && args.device != "cuda") {
    throw std::invalid_argument("--graphs needs --device cuda (CUDA graphs of NCCL calls)");
  }
  if (args.graphs > 0 && args.pairwise) {
    throw std::invalid_argument("--graphs times the sweep; --pairwise has no graphed form");
  }
  std::vector<std::string> argv = {ctx.mpirun, "-np", std::to_string(args.np)};
  // CPU ranks share the cores of this host; GPU ranks are one per GPU.
  if (args.device == "cpu") argv.push_back("--oversubscribe");
  mpirun::AppendBaseMpirunFlags(ctx.euid, {}, ctx.env, ctx.cma_works, &argv);
  for (const auto& [name, value] : ctx.env) {
    if (mpirun::IsForwardedVariable(name)) argv.insert(argv.end(), {"-x", name});
  }
  const std::string mode = args.both ? "both" : args.in_place ? "in-place" : "out-of-place";
  argv.insert(argv.end(),
              {ctx.commbench, "--device", args.device, "--op", args.op, "--min-bytes",
               std::to_string(min_bytes), "--max-bytes", std::to_string(max_bytes), "--step-factor",
               std::to_string(args.step_factor), "--iters", std::to_string(args.iters), "--warmup",
               std::to_string(args.warmup), "--mode", mode});
  if (args.graphs > 0) argv.insert(argv.end(), {"--graphs", std::to_string(args.graphs)});
  if (args.pairwise) argv.push_back("--pairwise");
  if (args.inject_error) argv.push_back("--inject-error");
  argv.insert(argv.end(), {"--output", ctx.output});
  return argv;
}

std::string FormatResultsTable(const nlohmann::json& doc) {
  std::ostringstream o;
  const nlohmann::json& results = doc.at("results");
  o << "# ringpilot bench comm: device " << doc.value("device", "?") << ", "
    << doc.value("ranks", 0) << " ranks on " << doc.value("nodes", 0)
    << " node(s); expected busbw: " << doc.value("expected_source", std::string("-")) << "\n";
  if (doc.contains("graph_replays")) {
    o << "# time: each size's loop as one CUDA graph, replayed " << doc["graph_replays"].get<int>()
      << " times (min, max, p99: single eager calls)\n";
  }
  o << "#" << Pad("size", 11) << Pad("mode", 6) << Pad("time(us)", 11) << Pad("min", 10)
    << Pad("max", 10) << Pad("p99", 10) << Pad("algbw", 9) << Pad("busbw", 9) << Pad("expect", 9)
    << Pad("ratio", 7) << Pad("#wrong", 8) << "\n";
  o << "#" << Pad("(B)", 11) << Pad("", 6) << Pad("", 11) << Pad("", 10) << Pad("", 10)
    << Pad("", 10) << Pad("(GB/s)", 9) << Pad("(GB/s)", 9) << Pad("(GB/s)", 9) << Pad("", 7)
    << Pad("", 8) << "\n";
  std::string op;
  double busbw_sum = 0;
  int wrong_results = 0;
  for (const nlohmann::json& r : results) {
    if (r.at("op").get<std::string>() != op) {
      op = r.at("op").get<std::string>();
      o << "# " << op << "\n";
    }
    const nlohmann::json& expected = r.at("expected_busbw_gbps");
    const nlohmann::json& ratio = r.at("ratio");
    o << " " << Pad(std::to_string(r.at("bytes").get<std::size_t>()), 11)
      << Pad(r.at("in_place").get<bool>() ? "in" : "out", 6)
      << Pad(base::FormatFixed(r.at("time_us").get<double>(), 2), 11)
      << Pad(base::FormatFixed(r.at("time_us_min").get<double>(), 2), 10)
      << Pad(base::FormatFixed(r.at("time_us_max").get<double>(), 2), 10)
      << Pad(base::FormatFixed(r.at("time_us_p99").get<double>(), 2), 10)
      << Pad(base::FormatFixed(r.at("algbw_gbps").get<double>(), 2), 9)
      << Pad(base::FormatFixed(r.at("busbw_gbps").get<double>(), 2), 9)
      << Pad(expected.is_null() ? "-" : base::FormatFixed(expected.get<double>(), 1), 9)
      << Pad(ratio.is_null() ? "-" : base::FormatFixed(ratio.get<double>(), 2), 7)
      << Pad(std::to_string(r.at("wrong").get<std::size_t>()), 8) << "\n";
    busbw_sum += r.at("busbw_gbps").get<double>();
    if (r.at("wrong").get<std::size_t>() > 0) ++wrong_results;
  }
  const double avg = results.empty() ? 0 : busbw_sum / static_cast<double>(results.size());
  o << "# Out of bounds values : " << wrong_results << (wrong_results ? " FAILED" : " OK") << "\n";
  o << "# Avg bus bandwidth    : " << base::FormatFixed(avg, 3) << " GB/s\n";
  return o.str();
}

double OffDiagonalMedian(const std::vector<std::vector<double>>& gbps) {
  std::vector<double> v;
  for (std::size_t s = 0; s < gbps.size(); ++s) {
    for (std::size_t d = 0; d < gbps[s].size(); ++d) {
      if (s != d) v.push_back(gbps[s][d]);
    }
  }
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::vector<std::pair<int, int>> FindSlowPairs(const std::vector<std::vector<double>>& gbps,
                                               double fraction) {
  const double median = OffDiagonalMedian(gbps);
  std::vector<std::pair<int, int>> slow;
  for (std::size_t s = 0; s < gbps.size(); ++s) {
    for (std::size_t d = 0; d < gbps[s].size(); ++d) {
      if (s != d && gbps[s][d] < fraction * median) {
        slow.emplace_back(static_cast<int>(s), static_cast<int>(d));
      }
    }
  }
  return slow;
}

bool IsSlowPair(const std::vector<std::pair<int, int>>& slow, std::size_t src, std::size_t dst) {
  return std::find(slow.begin(), slow.end(),
                   std::make_pair(static_cast<int>(src), static_cast<int>(dst))) != slow.end();
}

std::string FormatPairwiseMatrix(const std::vector<std::vector<double>>& gbps, std::size_t bytes) {
  const double median = OffDiagonalMedian(gbps);
  const auto slow = FindSlowPairs(gbps);
  std::ostringstream o;
  o << "# send/recv bandwidth (GB/s), " << FormatByteSize(bytes)
    << " per transfer; rows send, columns receive; * below 50% of the median ("
    << base::FormatFixed(median, 2) << ")\n"
    << Pad("src\\dst", 8);
  for (std::size_t d = 0; d < gbps.size(); ++d) o << Pad(std::to_string(d), 10);
  o << "\n";
  for (std::size_t s = 0; s < gbps.size(); ++s) {
    o << Pad(std::to_string(s), 8);
    for (std::size_t d = 0; d < gbps[s].size(); ++d) {
      const bool flagged = IsSlowPair(slow, s, d);
      o << Pad(s == d ? "-" : base::FormatFixed(gbps[s][d], 2) + (flagged ? "*" : " "), 10);
    }
    o << "\n";
  }
  for (const auto& [s, d] : slow) {
    o << "# slow: rank " << s << " -> rank " << d << ": "
      << base::FormatFixed(gbps[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)], 2)
      << " GB/s\n";
  }
  if (slow.empty()) o << "# no pair below 50% of the median\n";
  return o.str();
}

void AddBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: 'bench comm' (collectives)");
  bench->require_subcommand(1, 1);
  auto a = std::make_shared<BenchCommArgs>();
  CLI::App* comm = bench->add_subcommand(
      "comm", "Collective sweep (nccl-tests style) over MPI or NCCL, or a pairwise matrix");
  comm->add_option("--device", a->device, "cpu (MPI, host buffers) or cuda (NCCL)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  comm->add_option("--np", a->np, "Ranks (default: cpu 2, cuda the visible GPUs)")
      ->check(CLI::Range(1, 4096));
  comm->add_option("--op", a->op,
                   "allreduce, allgather, reduce_scatter, broadcast, alltoall, sendrecv "
                   "(comma-separated) or all");
  comm->add_option("--min-bytes", a->min_bytes, "Smallest size (e.g. 1K)");
  comm->add_option("--max-bytes", a->max_bytes, "Largest size (default cpu 1M, cuda 1G)");
  comm->add_option("--step-factor", a->step_factor, "Size step: 2 or 4")
      ->check(CLI::IsMember({2, 4}));
  comm->add_option("--iters", a->iters, "Timed iterations per size")->check(CLI::Range(1, 100000));
  comm->add_option("--warmup", a->warmup, "Warm-up iterations")->check(CLI::Range(0, 100000));
  comm->add_option("--graphs", a->graphs,
                   "cuda: time each size's --iters calls as one CUDA graph replayed N times "
                   "(nccl-tests -G N), as a graphed training step launches them")
      ->check(CLI::Range(0, 100000));
  CLI::Option* ip = comm->add_flag("--in-place", a->in_place, "In-place calls only");
  CLI::Option* oop = comm->add_flag("--out-of-place", a->out_of_place, "Out-of-place only");
  CLI::Option* both = comm->add_flag("--both", a->both, "Both modes");
  ip->excludes(oop)->excludes(both);
  oop->excludes(both);
  comm->add_flag("--json", a->json, "Print the JSON document");
  comm->add_option("--plot", a->plot,
                   "Write an SVG plot: busbw vs size, or with --pairwise the matrix as a heat map")
      ->type_name("FILE.svg");
  comm->add_flag("--pairwise", a->pairwise,
                 "Send/recv bandwidth matrix over all rank pairs at --max-bytes");
  comm->add_flag("--inject-error", a->inject_error,
                 "Testing only: corrupt one input element per check (expect wrong > 0, exit 1)");
  comm->callback([a] {
    const int status = RunBenchComm(*a, std::cout, std::cerr);
    std::cout.flush();
    std::exit(status);
  });
}

int RunBenchComm(BenchCommArgs args, std::ostream& out, std::ostream& err) {
  BenchContext ctx;
  ctx.env = base::CurrentEnvironment();
  const bool cuda = args.device == "cuda";
  if (args.np == 0) args.np = cuda ? VisibleGpus(ctx.env) : 2;
  if (args.np < 1) {
    err << "ringpilot bench comm: no GPU visible on this node (set --np or use --device cpu)\n";
    return kExitFailure;
  }
  if (args.max_bytes.empty()) args.max_bytes = cuda ? "1G" : "1M";
  ctx.mpirun = base::Lookup(ctx.env, "RINGPILOT_MPIRUN", "mpirun");
  ctx.commbench =
      base::Lookup(ctx.env, "RINGPILOT_COMMBENCH", SelfDirectory() + "/" + kCommbenchName);
  ctx.euid = static_cast<unsigned>(::geteuid());
  ctx.cma_works = mpirun::CrossMemoryAttachWorks();
  char tmpl[] = "/tmp/ringpilot-bench-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) {
    err << "ringpilot bench comm: cannot create a temporary file: " << std::strerror(errno) << "\n";
    return kExitFailure;
  }
  ::close(fd);
  ctx.output = tmpl;
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove_output{tmpl};

  std::vector<std::string> argv;
  try {
    argv = BuildCommbenchArgv(args, ctx);
  } catch (const std::invalid_argument& e) {
    err << "ringpilot bench comm: " << e.what() << "\n";
    return kExitBadInput;
  }
  if (base::ResolveExecutable(ctx.commbench, base::Lookup(ctx.env, "PATH", "")).empty()) {
    err << "ringpilot bench comm: '" << ctx.commbench << "' not found or not executable (build "
        << kCommbenchName << ", or set RINGPILOT_COMMBENCH)\n";
    return kExitFailure;
  }
  if (!args.json) err << "ringpilot: launching: " << base::ShellJoin(argv) << "\n";
  int status = 0;
  try {
    status = Spawn(argv, ctx.env);
  } catch (const std::runtime_error& e) {
    err << "ringpilot bench comm: " << e.what() << "\n";
    return kExitFailure;
  }
  if (status != 0) {
    err << "ringpilot bench comm: the benchmark exited with status " << status << "\n";
    return status;
  }
  nlohmann::json doc;
  std::string text;
  try {
    std::ifstream in(ctx.output);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    err << "ringpilot bench comm: no result document from " << kCommbenchName << ": " << e.what()
        << "\n";
    return kExitFailure;
  }
  try {
    return Report(args, doc, text, out, err);
  } catch (const nlohmann::json::exception& e) {
    err << "ringpilot bench comm: malformed result document: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace ringpilot::commbench
