// Which ports an exporter can listen on, asked before the ranks start: `ringpilot run` on
// one host picks the first free block of metrics ports at or above metrics.port_base, so
// that a second job on the host serves too, and its start-up line names the ports. The
// ranks still step over a port taken after the check (ExporterOptions::port_tries).
#pragma once

#include <string>

namespace ringpilot::metrics {

/// Whether a TCP socket can be bound to `address`:`port` now (numeric IPv4, as the exporter
/// binds it: SO_REUSEADDR, so a port in TIME_WAIT counts as free).
bool PortBindable(const std::string& address, int port);

/// The first port p = first + k x count (k = 0 .. blocks - 1) such that p .. p + count - 1
/// are all bindable on `address`; 0 when none is (or a block would pass 65535).
int FirstFreePortBlock(const std::string& address, int first, int count, int blocks);

}  // namespace ringpilot::metrics
