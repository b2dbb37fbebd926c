// `ringpilot-commbench`: the MPI program behind `ringpilot bench comm`. Every rank runs
// the sweep (or the pairwise matrix); rank 0 writes one JSON document to --output (or
// stdout). No LibTorch: MPI, and with RINGPILOT_WITH_CUDA the CUDA runtime and NCCL.
#include <mpi.h>

#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commbench/runner.h"
#include "commbench/sweep.h"
#include "topology/bandwidth.h"
#include "topology/probe.h"

namespace ringpilot::commbench {
namespace {

struct Args {
  std::string device = "cpu";
  std::string ops = "all";
  std::size_t min_bytes = 1024;
  std::size_t max_bytes = 1 << 20;
  int step_factor = 2;
  int iters = 20;
  int warmup = 5;
  int graphs = 0;  // > 0: the timed loop replayed from a CUDA graph this many times
  std::string mode = "out-of-place";  // in-place | out-of-place | both
  bool pairwise = false;
  bool inject_error = false;
  std::string output;
};

struct Expected {
  std::optional<double> gbps;
  std::string source;
};

// Expected bus bandwidth of this run from the topology of rank 0's node (every node
// assumed alike), by the model the trainer's metric uses (topology/bandwidth.h).
Expected ExpectedBusBandwidth(bool cuda, int ranks_per_node, int nodes) {
  const topology::JobBusBandwidth bw =
      topology::ExpectedJobBusBandwidth(topology::ProbeNode(), cuda, ranks_per_node, nodes);
  Expected e;
  if (bw.bytes_per_second > 0) e.gbps = bw.bytes_per_second / 1e9;
  e.source = bw.source;
  return e;
}

void Emit(const nlohmann::ordered_json& doc, const std::string& output) {
  if (output.empty()) {
    std::cout << doc.dump(2) << "\n";
    return;
  }
  std::ofstream out(output);
  out << doc.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + output);
}

int Main(int argc, char** argv) {
  CLI::App app{"ringpilot-commbench: collective sweeps over MPI or NCCL (run under mpirun)",
               "ringpilot-commbench"};
  Args a;
  app.add_option("--device", a.device, "cpu (MPI) or cuda (NCCL)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--op", a.ops, "Operation, comma-separated list, or all");
  app.add_option("--min-bytes", a.min_bytes, "Smallest size");
  app.add_option("--max-bytes", a.max_bytes, "Largest size (the pairwise size)");
  app.add_option("--step-factor", a.step_factor, "Size step")->check(CLI::IsMember({2, 4}));
  app.add_option("--iters", a.iters, "Timed iterations per size")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", a.warmup, "Warm-up iterations per size")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--mode", a.mode, "in-place, out-of-place or both")
      ->check(CLI::IsMember({"in-place", "out-of-place", "both"}));
  app.add_option("--graphs", a.graphs,
                 "Time each loop as one CUDA graph of --iters calls replayed N times (NCCL)")
      ->check(CLI::Range(0, 100000));
  app.add_flag("--pairwise", a.pairwise, "Send/recv bandwidth matrix at --max-bytes");
  app.add_flag("--inject-error", a.inject_error,
               "Testing: rank 0 corrupts one input element before each result check");
  app.add_option("--output", a.output, "Write the JSON document here (rank 0)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  MPI_Init(&argc, &argv);
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_rank = 0;
  int local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  int is_leader = local_rank == 0 ? 1 : 0;
  int nodes = 1;
  MPI_Allreduce(&is_leader, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_free(&local);

  try {
    const bool cuda = a.device == "cuda";
    std::unique_ptr<Backend> backend;
    if (cuda) {
#ifdef RINGPILOT_WITH_CUDA
      backend = MakeNcclBackend(MPI_COMM_WORLD, local_rank);
#else
      throw std::runtime_error("built without CUDA: --device cuda is not available");
#endif
    } else {
      backend = MakeMpiBackend(MPI_COMM_WORLD);
    }
    nlohmann::ordered_json doc;
    doc["device"] = a.device;
    doc["ranks"] = ranks;
    doc["nodes"] = nodes;
    // Readers tell a graphed sweep's means from an eager one's by this.
    if (a.graphs > 0) doc["graph_replays"] = a.graphs;
    if (a.pairwise) {
      const auto matrix = RunPairwise(*backend, MPI_COMM_WORLD, a.max_bytes, a.warmup, a.iters);
      doc["pairwise"] = {{"bytes", a.max_bytes}, {"gbps", matrix}};
    } else {
      SweepOptions o;
      o.ops = ParseOpList(a.ops);
      o.sizes = SweepSizes(a.min_bytes, a.max_bytes, a.step_factor);
      o.out_of_place = a.mode != "in-place";
      o.in_place = a.mode != "out-of-place";
      o.warmup = a.warmup;
      o.iters = a.iters;
      o.graph_replays = a.graphs;
      o.inject_error = a.inject_error;
      Expected expected;
      if (rank == 0) expected = ExpectedBusBandwidth(cuda, ranks / nodes, nodes);
      o.expected_busbw_gbps = expected.gbps;
      doc["expected_source"] = expected.source;
      doc["results"] = nlohmann::ordered_json::array();
      for (const Result& r : RunSweep(*backend, MPI_COMM_WORLD, o)) {
        doc["results"].push_back(ToJson(r));
      }
    }
    backend.reset();
    if (rank == 0) Emit(doc, a.output);
  } catch (const std::exception& e) {
    std::cerr << "ringpilot-commbench: rank " << rank << ": " << e.what() << "\n";
    // The other ranks may be inside a collective: end them all.
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace ringpilot::commbench

int main(int argc, char** argv) { return ringpilot::commbench::Main(argc, argv); }
