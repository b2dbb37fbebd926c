#include "cli/topo_command.h"

#include <cstdlib>
#include <iostream>
#include <memory>

#include "topology/node_topology.h"
#include "topology/probe.h"
#include "topology/render.h"

namespace ringpilot::cli {

void AddTopoCommand(CLI::App& app) {
  auto args = std::make_shared<TopoArgs>();
  CLI::App* topo = app.add_subcommand(
      "topo", "Show this node's topology (GPUs, NVLinks, PCIe paths, NICs, NUMA/CPUs)");
  CLI::Option* json = topo->add_flag("--json", args->json, "Print the JSON snapshot");
  CLI::Option* dot = topo->add_flag("--dot", args->dot, "Print a Graphviz graph");
  json->excludes(dot);
  topo->add_option("--from", args->from,
                   "Render a saved snapshot (from 'ringpilot topo --json') instead of probing")
      ->type_name("SNAPSHOT");
  topo->callback([args] {
    const int status = RunTopo(*args, std::cout, std::cerr);
    std::cout.flush();
    std::exit(status);
  });
}

int RunTopo(const TopoArgs& args, std::ostream& out, std::ostream& err) {
  topology::NodeTopology topo;
  if (args.from.empty()) {
    topo = topology::ProbeNode();
  } else {
    try {
      topo = topology::LoadSnapshot(args.from);
    } catch (const topology::SnapshotError& e) {
      err << "ringpilot topo: " << e.what() << "\n";
      return 2;
    }
  }
  if (args.json) {
    out << topology::ToJson(topo).dump(2) << "\n";
  } else if (args.dot) {
    out << topology::RenderDot(topo);
  } else {
    out << topology::RenderText(topo);
  }
  return 0;
}

}  // namespace ringpilot::cli
