// The front door of the metrics exporter. civetweb gives a connection one of its few
// worker threads from the moment it is accepted, so clients that connect and send nothing
// (or trickle a header) hold every worker for request_timeout_ms each, and scrapes queue
// behind them: ten idle connections kept a 2-thread exporter from answering for 30 s.
// The gate listens on the public address itself and holds each new connection in one
// epoll thread, at the cost of a file descriptor and its bytes so far, until the client
// has sent a whole request header; only then is the connection relayed, both ways, to
// civetweb on a loopback port. Used by metrics::Exporter (exporter.h), nothing else.
#pragma once

#include <cstddef>
#include <string>
#include <thread>

namespace ringpilot::metrics {

struct ConnectionGateOptions {
  /// Numeric IPv4 address to listen on and the port (0: any free port).
  std::string bind;
  int port = 0;
  /// A new connection's request header must be complete within this; a relayed
  /// connection that moves no byte for this long is closed too. Required (> 0).
  int header_timeout_ms = 0;
  /// A longer request header is answered 431 and closed. Required (> 0).
  std::size_t max_header_bytes = 0;
  /// Connections waiting for their header at most; the oldest is closed to make room, so
  /// idle clients cannot lock a scraper out. Required (> 0).
  int max_pending = 0;
  /// false (TLS, whose header the gate cannot read): relay once the first byte arrives.
  bool inspect_headers = true;
  /// Nice value of the gate's thread (base/thread_priority.h; 0: unchanged).
  int thread_nice = 0;
};

/// Owns its listening socket and one thread. Construction and destruction are not
/// thread-safe; port() is.
class ConnectionGate {
 public:
  /// Binds and listens (connections wait in the kernel's backlog until Start). Throws
  /// std::system_error carrying the errno of socket/bind/listen (the caller words it), and
  /// std::invalid_argument for options out of range.
  explicit ConnectionGate(ConnectionGateOptions options);
  /// Stops accepting, closes every connection it holds, joins its thread.
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  /// Starts relaying complete requests to 127.0.0.1:upstream_port. Call once. Throws
  /// std::system_error when the thread or its epoll cannot be created.
  void Start(int upstream_port);

  /// The port bound (the chosen one when options.port was 0).
  int port() const { return port_; }

 private:
  const ConnectionGateOptions options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: the destructor's stop signal
  int port_ = 0;
  int upstream_port_ = 0;
  std::thread thread_;
};

}  // namespace ringpilot::metrics
