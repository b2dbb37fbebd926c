// NCCL's INFO log (NCCL_DEBUG=INFO, NCCL_DEBUG_FILE): which transport each connection to a
// peer uses. Pure functions; the trainer reads its own rank's log after the first step
// (connections are made at init or lazily at the first collective) and `ringpilot
// diagnose` reads every rank's.
#pragma once

#include <istream>
#include <map>
#include <set>
#include <string>

namespace ringpilot::metrics {

/// Transport label for NCCL's "via X" text: "P2P" (P2P/IPC, P2P/CUMEM, P2P/direct
/// pointer, ...), "SHM", "NET_IB" (NET/IB/0/GDRDMA, NET/IBext), "NET_Socket", "COLLNET",
/// or a NET plugin's name as "NET_<name>"; "" when `via` names no transport.
std::string ClassifyNcclTransport(const std::string& via);

/// Parses one "NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA" line.
/// Returns false for other lines.
bool ParseNcclChannelLine(const std::string& line, int* from, int* to, std::string* transport);

/// For `rank`'s log: every peer it connects to, with the transports seen.
std::map<int, std::set<std::string>> NcclPeerTransports(std::istream& log, int rank);

}  // namespace ringpilot::metrics
