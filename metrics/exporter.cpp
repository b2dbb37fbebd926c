#include "metrics/exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <CivetServer.h>
#include <civetweb.h>
#include <netdb.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include "base/thread_priority.h"
#include "metrics/connection_gate.h"

namespace ringpilot::metrics {
// Defined in thread_stack.cpp; referencing it links the stack-size floor in.
void LinkThreadStackFloor();
}  // namespace ringpilot::metrics

namespace ringpilot::metrics {
namespace {

constexpr const char kRealm[] = "Basic realm=\"ringpilot metrics\", charset=\"UTF-8\"";
constexpr const char kIndexPage[] =
    "<!DOCTYPE html>\n<html><head><title>ringpilot metrics</title></head>\n"
    "<body><h1>ringpilot metrics</h1><p><a href=\"/metrics\">/metrics</a></p></body></html>\n";

// civetweb reports start-up failures (e.g. the bind errno) only through the log
// callback, on the thread that starts the server; this collects them for the exception.
thread_local std::string* t_start_log = nullptr;

int LogMessage(const mg_connection* /*conn*/, const char* message) {
  if (t_start_log != nullptr && message != nullptr) {
    if (!t_start_log->empty()) *t_start_log += "; ";
    *t_start_log += message;
  }
  // Later messages (clients hanging up mid-response and the like) are not actionable
  // for a metrics endpoint; returning 1 keeps civetweb from printing them.
  return 1;
}

// civetweb hands begin_request only the connection; its context leads back to the Exporter.
// init_context runs on the constructing thread before any worker starts, so every request
// finds its Exporter here.
std::mutex& ContextsMutex() {
  static std::mutex mu;
  return mu;
}
std::map<const mg_context*, Exporter*>& Contexts() {
  static std::map<const mg_context*, Exporter*> contexts;
  return contexts;
}
thread_local Exporter* t_starting = nullptr;

void InitContext(const mg_context* ctx) {
  if (t_starting == nullptr) return;
  std::lock_guard<std::mutex> lock(ContextsMutex());
  Contexts()[ctx] = t_starting;
}

Exporter* ExporterOf(const mg_context* ctx) {
  std::lock_guard<std::mutex> lock(ContextsMutex());
  const auto it = Contexts().find(ctx);
  return it == Contexts().end() ? nullptr : it->second;
}
Exporter* ExporterOf(const mg_connection* conn) { return ExporterOf(mg_get_context(conn)); }

// civetweb's master and worker threads, each as it starts (after InitContext).
void* InitThread(const mg_context* ctx, int /*thread_type*/) {
  const Exporter* exporter = ExporterOf(ctx);
  base::SetThisThreadNice(exporter ? exporter->thread_nice() : 0);
  return nullptr;
}

void ForgetExporter(const Exporter* exporter) {
  std::lock_guard<std::mutex> lock(ContextsMutex());
  for (auto it = Contexts().begin(); it != Contexts().end();) {
    it = it->second == exporter ? Contexts().erase(it) : std::next(it);
  }
}

void InitCivetwebOnce() {
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });
}

// mg_start initializes OpenSSL lazily on first TLS use and that path is not
// thread-safe, so exporters in one process start one at a time.
std::mutex& StartMutex() {
  static std::mutex mu;
  return mu;
}

std::string HostPort(const std::string& host, int port) {
  return host + ":" + std::to_string(port);
}

// civetweb parses listening_ports with sscanf and silently binds nonsense like
// "999.1.1.1" to something else, so the address is resolved and checked here first.
std::string ResolveIpv4(const std::string& bind, int port) {
  const std::string where = "metrics exporter: cannot listen on " + HostPort(bind, port) + ": ";
  if (bind.empty()) throw ExporterError(where + "bind address is empty");
  if (bind.find(':') != std::string::npos) {
    throw ExporterError(where + "IPv6 addresses are not supported, use an IPv4 address");
  }
  in_addr addr{};
  if (inet_pton(AF_INET, bind.c_str(), &addr) == 1) return bind;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(bind.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    throw ExporterError(where + "not an IPv4 address or resolvable host name (" + gai_strerror(rc) +
                        ")");
  }
  char text[INET_ADDRSTRLEN] = {};
  const auto* sin = reinterpret_cast<const sockaddr_in*>(result->ai_addr);
  inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text));
  freeaddrinfo(result);
  return text;
}

void ValidateOptions(const ExporterOptions& o) {
  const std::string where = "metrics exporter: ";
  if (o.port_step < 1 || o.port_tries < 1) {
    throw ExporterError(where + "invalid port_step " + std::to_string(o.port_step) +
                        " or port_tries " + std::to_string(o.port_tries) + " (1 or more)");
  }
  if (o.port < 0 || o.port > 65535) {
    throw ExporterError(where + "invalid port " + std::to_string(o.port) + " (0..65535)");
  }
  if (o.threads < 1 || o.threads > ExporterOptions::kMaxThreads) {
    throw ExporterError(where + "invalid threads " + std::to_string(o.threads) + " (1.." +
                        std::to_string(ExporterOptions::kMaxThreads) + ")");
  }
  if (o.request_timeout_ms < 1) {
    throw ExporterError(where + "invalid request_timeout_ms " +
                        std::to_string(o.request_timeout_ms) + " (must be > 0)");
  }
  if (o.thread_nice < 0 || o.thread_nice > 19) {
    throw ExporterError(where + "invalid thread_nice " + std::to_string(o.thread_nice) +
                        " (0..19)");
  }
  if (o.basic_auth_user.empty() != o.basic_auth_password.empty()) {
    throw ExporterError(where + "basic auth needs both basic_auth_user and basic_auth_password");
  }
  if (o.basic_auth_user.find(':') != std::string::npos) {
    throw ExporterError(where + "basic_auth_user may not contain ':'");
  }
  if (!o.tls_cert_pem.empty()) {
    if (!std::ifstream(o.tls_cert_pem)) {
      throw ExporterError(where + "TLS certificate " + o.tls_cert_pem +
                          ": cannot read: " + std::strerror(errno));
    }
    if (mg_check_feature(MG_FEATURES_TLS) == 0) {
      throw ExporterError(where + "TLS certificate " + o.tls_cert_pem +
                          " given, but this civetweb build has no TLS support");
    }
  }
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard alphabet; padding optional. Returns false on any other character.
bool Base64Decode(std::string_view in, std::string& out) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  unsigned int buffer = 0;
  int bits = 0;
  for (const char c : in) {
    const int v = Base64Value(c);
    if (v < 0) return false;
    buffer = (buffer << 6) | static_cast<unsigned int>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  return true;
}

// Compares without an early exit so response time does not reveal how much of a
// guessed password was right (the length is not secret enough to hide).
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Connects and hangs up at once. A wildcard bind is reached through loopback.
void PokeListener(const std::string& address, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  // On Linux SO_SNDTIMEO also bounds connect(), so a full backlog cannot stall us.
  timeval timeout{0, 200 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (address == "0.0.0.0" || inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  close(fd);
}

using Headers = std::vector<std::pair<const char*, std::string>>;

// The response is written raw rather than through mg_response_header_send, whose
// Date header comes from gmtime() and races between civetweb's worker threads.
std::string ResponseHead(mg_connection* conn, int status, const char* content_type) {
  char date[64] = {};
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return "HTTP/1.1 " + std::to_string(status) + " " + mg_get_response_code_text(conn, status) +
         "\r\nDate: " + date + "\r\nContent-Type: " + content_type +
         "\r\nCache-Control: no-store\r\nConnection: close\r\n";
}

int Send(mg_connection* conn, int status, const char* content_type, const std::string& body,
         bool head, const Headers& extra = {}) {
  std::string response = ResponseHead(conn, status, content_type);
  response += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& [name, value] : extra) response += std::string(name) + ": " + value + "\r\n";
  response += "\r\n";
  if (!head) response += body;
  mg_write(conn, response.data(), response.size());
  return status;
}

// HEAD /metrics: the headers of a scrape without collecting one, so no Content-Length.
int SendHead(mg_connection* conn, int status, const char* content_type) {
  const std::string response = ResponseHead(conn, status, content_type) + "\r\n";
  mg_write(conn, response.data(), response.size());
  return status;
}

}  // namespace

Exporter::Exporter(std::weak_ptr<prometheus::Collectable> metrics, ExporterOptions options)
    : options_(std::move(options)) {
  ValidateOptions(options_);
  address_ = ResolveIpv4(options_.bind, options_.port);
  if (!options_.basic_auth_user.empty()) {
    expected_credentials_ = options_.basic_auth_user + ":" + options_.basic_auth_password;
  }
  LinkThreadStackFloor();
  InitCivetwebOnce();

  const bool tls = !options_.tls_cert_pem.empty();
  const std::string where = HostPort(options_.bind, options_.port);
  // Clients reach civetweb through the gate (connection_gate.h), which holds a connection
  // until its request header is complete: idle clients cannot occupy civetweb's workers.
  // Binding the public port first reports a port in use before any thread starts.
  ConnectionGateOptions gate;
  gate.bind = address_;
  gate.port = options_.port;
  gate.header_timeout_ms = options_.request_timeout_ms;
  gate.max_header_bytes = kMaxRequestHeaderBytes;
  gate.max_pending = kMaxPendingConnections;
  gate.inspect_headers = !tls;
  gate.thread_nice = options_.thread_nice;
  const int tries = options_.port > 0 ? std::max(1, options_.port_tries) : 1;
  for (int i = 0;; ++i) {
    gate.port = options_.port + i * options_.port_step;
    try {
      gate_ = std::make_unique<ConnectionGate>(gate);
      break;
    } catch (const std::system_error& e) {
      // Another process has the port: the next block, if any is left.
      const int next = gate.port + options_.port_step;
      if (e.code().value() == EADDRINUSE && i + 1 < tries && next <= 65535) continue;
      std::string tried = where;
      if (i > 0) {
        tried += " nor on the next " + std::to_string(i) + " port(s) " +
                 std::to_string(options_.port + options_.port_step) + ".." +
                 std::to_string(gate.port) + " (step " + std::to_string(options_.port_step) + ")";
      }
      throw ExporterError("metrics exporter: cannot listen on " + tried + ": " +
                          std::strerror(e.code().value()));
    }
  }
  std::vector<std::string> config = {
      "listening_ports",    HostPort("127.0.0.1", 0) + (tls ? "s" : ""),
      "num_threads",        std::to_string(options_.threads),
      "request_timeout_ms", std::to_string(options_.request_timeout_ms),
      "enable_keep_alive",  "no",
  };
  if (tls) {
    config.push_back("ssl_certificate");
    config.push_back(options_.tls_cert_pem);
  }
  CivetCallbacks callbacks;  // copied by the server
  // begin_request sees every request before prometheus-cpp's handler: access rules, the
  // scrape hook and the other paths are decided there.
  callbacks.begin_request = &Exporter::BeginRequest;
  callbacks.log_message = &LogMessage;
  callbacks.init_context = &InitContext;
  callbacks.init_thread = &InitThread;

  std::string start_log;
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(StartMutex());
    t_start_log = &start_log;
    t_starting = this;
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(std::move(config), &callbacks);
    } catch (const std::exception& e) {
      failure = e.what();  // CivetException: "null context when constructing CivetServer..."
    }
    t_start_log = nullptr;
    t_starting = nullptr;
  }
  if (!exposer_) {
    ForgetExporter(this);
    std::string reason = start_log.empty() ? failure : start_log;
    if (tls &&
        (reason.find("SSL") != std::string::npos || reason.find("ssl") != std::string::npos ||
         reason.find("certificate") != std::string::npos)) {
      // Debian's civetweb 1.15 loads libssl.so at run time and expects the OpenSSL
      // 1.1 API, which OpenSSL 3 lacks; say so rather than leave a symbol name.
      if (reason.find("load_tls_dll") != std::string::npos) {
        reason +=
            " (this civetweb build cannot use the installed OpenSSL; terminate TLS in "
            "a proxy or use a civetweb built against it)";
      }
      throw ExporterError("metrics exporter: cannot serve HTTPS on " + where + " with " +
                          options_.tls_cert_pem + ": " + reason);
    }
    // civetweb words it "cannot bind to ADDR: ERRNO (TEXT); Failed to setup server
    // ports"; our prefix already names the address, so keep just TEXT.
    if (reason.rfind("cannot bind to", 0) == 0) {
      const auto open = reason.find('(');
      const auto close = reason.find(')', open);
      if (open != std::string::npos && close != std::string::npos) {
        reason = reason.substr(open + 1, close - open - 1);
      }
    }
    throw ExporterError("metrics exporter: cannot listen on " + where + ": " + reason);
  }

  const std::vector<int> ports = exposer_->GetListeningPorts();
  if (ports.empty() || ports[0] <= 0) {
    exposer_.reset();
    ForgetExporter(this);
    throw ExporterError("metrics exporter: listening on " + where +
                        " but civetweb reports no bound port");
  }
  server_port_ = ports[0];
  port_ = gate_->port();
  exposer_->RegisterCollectable(metrics);
  ready_.store(true, std::memory_order_release);
  try {
    gate_->Start(server_port_);
  } catch (const std::system_error& e) {
    exposer_.reset();
    ForgetExporter(this);
    throw ExporterError("metrics exporter: cannot serve on " + where + ": " + e.what());
  }
}

Exporter::~Exporter() {
  // civetweb's accept loop polls in 2 s slices and checks the stop flag only between
  // them, so stopping alone takes up to 2 s. A connection to our own port ends the
  // slice early. It is repeated until the server has stopped because a connection that
  // lands before the flag is set is just served (and sees EOF) like any client.
  gate_.reset();  // no new connections; relayed ones are closed
  std::atomic<bool> stopped{false};
  std::thread waker;
  try {
    waker = std::thread([this, &stopped] {
      while (!stopped.load(std::memory_order_relaxed)) {
        PokeListener("127.0.0.1", server_port_);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  } catch (const std::system_error&) {
    // Without the waker stopping is merely slower; a destructor must not throw.
  }
  exposer_.reset();  // mg_stop: joins civetweb's threads
  stopped.store(true, std::memory_order_relaxed);
  if (waker.joinable()) waker.join();
  ForgetExporter(this);
}

std::string Exporter::url() const {
  const char* scheme = options_.tls_cert_pem.empty() ? "http://" : "https://";
  return scheme + HostPort(options_.bind, port_) + "/metrics";
}

void Exporter::SetScrapeCallback(std::function<void()> cb) {
  std::lock_guard<std::mutex> lock(scrape_mu_);
  scrape_callback_ = std::move(cb);
}

int Exporter::BeginRequest(mg_connection* conn) {
  // An exception must not unwind through civetweb's C frames.
  try {
    Exporter* self = ExporterOf(conn);
    if (self == nullptr) {
      return Send(conn, 503, "text/plain; charset=utf-8", "503 Service Unavailable\n", false);
    }
    return self->Handle(conn);
  } catch (const std::exception& e) {
    return Send(conn, 500, "text/plain; charset=utf-8",
                std::string("internal error: ") + e.what() + "\n", false);
  } catch (...) {
    return Send(conn, 500, "text/plain; charset=utf-8", "internal error\n", false);
  }
}

bool Exporter::Authorized(mg_connection* conn) const {
  if (expected_credentials_.empty()) return true;
  const char* header = mg_get_header(conn, "Authorization");
  if (header == nullptr) return false;
  std::string_view value(header);
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  const auto space = value.find(' ');
  if (space == std::string_view::npos || !EqualsIgnoreCase(value.substr(0, space), "Basic")) {
    return false;
  }
  value.remove_prefix(space);
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  std::string decoded;
  if (!Base64Decode(value, decoded)) return false;
  return ConstantTimeEquals(decoded, expected_credentials_);
}

// Returns the HTTP status it answered with, or 0 to let prometheus-cpp's /metrics handler
// collect and answer.
int Exporter::Handle(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string_view method = info->request_method != nullptr ? info->request_method : "";
  const std::string_view path = info->local_uri != nullptr ? info->local_uri : "";
  const bool head = method == "HEAD";

  // Authentication comes first so that an anonymous client learns nothing, not even
  // which paths exist.
  if (!Authorized(conn)) {
    return Send(conn, 401, "text/plain; charset=utf-8", "401 Unauthorized\n", head,
                {{"WWW-Authenticate", kRealm}});
  }
  if (method != "GET" && !head) {
    return Send(conn, 405, "text/plain; charset=utf-8", "405 Method Not Allowed\n", false,
                {{"Allow", "GET, HEAD"}});
  }
  if (path == "/") return Send(conn, 200, "text/html; charset=utf-8", kIndexPage, head);
  if (path != "/metrics")
    return Send(conn, 404, "text/plain; charset=utf-8", "404 Not Found\n", head);
  if (!ready_.load(std::memory_order_acquire)) {
    return Send(conn, 503, "text/plain; charset=utf-8", "503 Service Unavailable\n", head);
  }
  if (head) return SendHead(conn, 200, kExpositionContentType);
  std::string callback_error;
  {
    std::lock_guard<std::mutex> lock(scrape_mu_);
    if (scrape_callback_) {
      try {
        scrape_callback_();
      } catch (const std::exception& e) {
        callback_error = e.what();
      } catch (...) {
        callback_error = "unknown exception";
      }
    }
  }
  if (!callback_error.empty()) {
    return Send(conn, 500, "text/plain; charset=utf-8",
                "scrape callback failed: " + callback_error + "\n", false);
  }
  return 0;
}

}  // namespace ringpilot::metrics
