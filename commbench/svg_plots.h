// The pictures `ringpilot bench comm --plot` writes: hand-written SVG, no plotting library
// (the command has no LibTorch and no Python).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringpilot::commbench {

/// SVG of busbw against size: log2 x axis, one polyline per operation and mode (in-place
/// dashed), legend. Results with bytes 0 are ignored.
std::string RenderBusBandwidthSvg(const nlohmann::json& results, const std::string& title);

/// SVG of the pairwise matrix as a heat map: one cell per ordered pair (rows send, columns
/// receive), its shade the pair's GB/s against the fastest pair's, the value written in it
/// when the cells are large enough; FindSlowPairs' pairs outlined in red and listed under
/// the map; the diagonal grey.
std::string RenderPairwiseSvg(const std::vector<std::vector<double>>& gbps, std::size_t bytes,
                              const std::string& title);

}  // namespace ringpilot::commbench
