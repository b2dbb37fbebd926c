// HTTP endpoint that serves metrics to Prometheus: prometheus::Exposer (prometheus-cpp's
// civetweb server) with this project's options, access rules and scrape hook.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

struct mg_connection;

namespace ringpilot::metrics {

class ConnectionGate;

/// Content-Type of GET /metrics (prometheus-cpp's; Prometheus reads it as text format 0.0.4).
inline constexpr const char kExpositionContentType[] = "text/plain; charset=utf-8";

/// Thrown when the exporter cannot be set up: invalid options, a port that is taken,
/// an address that cannot be bound, TLS that this civetweb build cannot provide.
/// The message starts with "metrics exporter: " and names the address or file.
class ExporterError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// How to serve. The defaults are neutral (loopback, any free port); a job's configuration
/// (config/job.h `metrics`, mapped by the trainer) supplies the real address and port.
struct ExporterOptions {
  static constexpr int kDefaultThreads = 2;
  static constexpr int kMaxThreads = 64;
  static constexpr int kDefaultRequestTimeoutMs = 10000;
  static constexpr int kDefaultThreadNice = 19;

  /// IPv4 address (or a host name resolving to one) to listen on. Loopback unless
  /// configured: exposing metrics off-host is an explicit choice.
  std::string bind = "127.0.0.1";
  /// TCP port; 0 picks a free port (port() reports it).
  int port = 0;
  /// When `port` is taken (EADDRINUSE), try port + port_step, port + 2 x port_step, ...:
  /// port_tries ports in all (1: `port` only). A rank steps by its node's rank count, so a
  /// second job's ranks take the next free block together (base::kMetricsPortBlocks).
  int port_step = 1;
  int port_tries = 1;
  /// Both set: every request needs `Authorization: Basic base64(user:password)`.
  /// Exactly one set is an error; the user may not contain ':' (RFC 7617).
  std::string basic_auth_user;
  std::string basic_auth_password;
  /// Path to a PEM file holding certificate and private key: serve HTTPS. Needs a
  /// civetweb that can load the system's OpenSSL; otherwise the constructor throws.
  std::string tls_cert_pem;
  /// HTTP worker threads (1..kMaxThreads).
  int threads = kDefaultThreads;
  /// A client that stalls longer than this while sending or receiving is dropped,
  /// so a stuck scraper cannot hold a worker thread forever; a new connection must have
  /// sent its whole request header within this.
  int request_timeout_ms = kDefaultRequestTimeoutMs;
  /// Nice value (0..19) of every thread the exporter runs (HTTP workers and their master,
  /// the connection gate): on a host whose cores training keeps busy, scrapes get the CPU
  /// it leaves, so many scrapers slow a scrape rather than a step. 0: the process's own.
  int thread_nice = kDefaultThreadNice;
};

/// Serves, on its own threads:
///   GET /metrics  every family of `metrics` that has a series, and prometheus-cpp's own
///                 `exposer_*` series, through prometheus::TextSerializer (gzip when the
///                 client accepts it; Content-Type: text/plain; charset=utf-8)
///   HEAD /metrics 200 with the Content-Type and no body (nothing is collected)
///   GET /         a short HTML page that links /metrics
///   anything else 404; methods other than GET/HEAD 405; a request header over 16 KiB 431.
/// Connections reach the HTTP server only once their request header is complete
/// (connection_gate.h): clients that connect and send nothing, or trickle, wait in one
/// epoll thread, not in a worker, so they cannot hold scrapes up.
/// With basic auth configured every path answers 401 (with WWW-Authenticate) until
/// the right credentials are sent. The public methods are thread-safe.
class Exporter {
 public:
  /// Starts listening before it returns. `metrics` is held weakly (metrics::Families::
  /// registry() converts): once it is gone, scrapes leave it out. Throws ExporterError,
  /// e.g. "metrics exporter: cannot listen on 127.0.0.1:18400: Address already in use".
  Exporter(std::weak_ptr<prometheus::Collectable> metrics, ExporterOptions options);
  /// Stops accepting, waits for in-flight requests to finish, joins the threads.
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  /// The port actually bound (the chosen one when options.port was 0).
  int port() const { return port_; }
  /// The numeric IPv4 address bound (options.bind resolved; "0.0.0.0" for every interface).
  const std::string& address() const { return address_; }
  /// Whether it serves HTTPS.
  bool tls() const { return !options_.tls_cert_pem.empty(); }
  /// "http://<bind>:<port>/metrics" ("https://" with TLS).
  std::string url() const;
  /// options.thread_nice.
  int thread_nice() const { return options_.thread_nice; }

  /// Runs `cb` on an HTTP thread before every GET /metrics is collected (e.g. to refresh
  /// gauges), never concurrently with itself. An empty function removes the hook. If `cb`
  /// throws, that scrape answers 500 with the message. Waits for a running `cb` to
  /// finish; `cb` must not call SetScrapeCallback.
  void SetScrapeCallback(std::function<void()> cb);

 private:
  // Request headers longer than this are answered 431 (civetweb's own limit is 16 KiB).
  static constexpr std::size_t kMaxRequestHeaderBytes = 16 * 1024;
  // Connections still sending their header; the oldest is dropped for a new one.
  static constexpr int kMaxPendingConnections = 512;

  static int BeginRequest(mg_connection* conn);
  int Handle(mg_connection* conn);
  bool Authorized(mg_connection* conn) const;

  const ExporterOptions options_;
  std::string address_;               // numeric IPv4 that was bound
  std::string expected_credentials_;  // "user:password" when basic auth is on
  int port_ = 0;                      // the public port (the gate's)
  int server_port_ = 0;               // civetweb's, on loopback
  std::unique_ptr<ConnectionGate> gate_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::atomic<bool> ready_{false};  // the metrics are registered with exposer_

  std::mutex scrape_mu_;  // serializes scrape callbacks and guards scrape_callback_
  std::function<void()> scrape_callback_;
};

}  // namespace ringpilot::metrics
