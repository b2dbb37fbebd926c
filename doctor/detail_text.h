// Text for check details: last lines of command output, lists, NCCL versions, sizes
// (internal to doctor/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringpilot::doctor {

/// The last non-empty line of `text` (a command's output), for one-line messages.
std::string LastLine(const std::string& text);

/// `parts` joined with `sep`.
std::string Join(const std::vector<std::string>& parts, const std::string& sep);

/// ncclGetVersion's number as "2.21.5": MAJOR*10000 + MINOR*100 + PATCH since 2.9
/// (MAJOR*1000 + MINOR*100 + PATCH before).
std::string NcclVersionText(int v);

/// Bytes as "16 MiB" / "1.5 GiB".
std::string FormatBytes(std::uint64_t bytes);

}  // namespace ringpilot::doctor
