// Access to the topology snapshots under tests/fixtures/topology.
#pragma once

#include <cstdlib>
#include <string>

#include "topology/node_topology.h"

namespace ringpilot::topology::testing {

inline std::string FixturePath(const std::string& name) {
  const char* src = std::getenv("RINGPILOT_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/fixtures/topology/" + name;
}

inline NodeTopology Fixture(const std::string& name) { return LoadSnapshot(FixturePath(name)); }

}  // namespace ringpilot::topology::testing
