// libFuzzer target: the metrics exporter's HTTP handling (metrics/exporter.h) as a client
// reaches it. Each input is sent raw over TCP to a real Exporter (civetweb under
// prometheus-cpp, with ringpilot's begin_request: basic auth, methods, paths, the scrape
// hook), the write side is closed, and the answer read. The first byte picks the exporter:
// even, open; odd, basic auth as user "prom" with password "s3cret" (Authorization:
// Basic cHJvbTpzM2NyZXQ=). Contract checked: every answer is empty (civetweb dropped a
// malformed request) or starts with an HTTP status line and comes within 5 s, and a
// well-formed scrape of each exporter still answers 200 with the metrics afterwards
// (checked every 16 inputs).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "metrics/exporter.h"
#include "metrics/families.h"

namespace {

using ringpilot::metrics::Exporter;
using ringpilot::metrics::ExporterOptions;
using ringpilot::metrics::Families;

constexpr int kAnswerTimeoutS = 5;
constexpr const char kAuthHeader[] = "Authorization: Basic cHJvbTpzM2NyZXQ=\r\n";

[[noreturn]] void Finding(const std::string& what) {
  std::fprintf(stderr, "http_request_fuzzer: %s\n", what.c_str());
  std::abort();
}

struct Server {
  Families families{{"job", "fuzz"}, {"rank", "0"}};
  std::unique_ptr<Exporter> open;
  std::unique_ptr<Exporter> auth;
  int scrapes = 0;

  Server() {
    families.AddCounter("ringpilot_steps_total", "Steps.").Add({}).Increment(7);
    families.AddHistogram("ringpilot_step_seconds", "Step time.")
        .Add({}, prometheus::Histogram::BucketBoundaries{0.1, 1})
        .Observe(0.5);
    ExporterOptions o;  // loopback, a free port
    open = std::make_unique<Exporter>(families.registry(), o);
    o.basic_auth_user = "prom";
    o.basic_auth_password = "s3cret";
    auth = std::make_unique<Exporter>(families.registry(), o);
    auth->SetScrapeCallback([this] { ++scrapes; });
  }
};

Server& TheServer() {
  static Server* server = new Server();  // lives as long as the process: civetweb threads
  return *server;
}

// Sends `request` to 127.0.0.1:port, closes the write side, returns everything read
// until the server closes. A connection or an answer that takes over kAnswerTimeoutS is a
// finding (a worker stuck on one client).
std::string Exchange(int port, const char* request, size_t size) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Finding(std::string("socket: ") + std::strerror(errno));
  timeval timeout{kAnswerTimeoutS, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // libFuzzer's timer (SIGALRM) interrupts system calls: EINTR is retried everywhere.
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    if (err == EINTR) {  // the connection goes on: wait for its outcome
      pollfd p{fd, POLLOUT, 0};
      while (::poll(&p, 1, kAnswerTimeoutS * 1000) < 0 && errno == EINTR) {
      }
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) Finding("cannot connect to the exporter: " + std::string(std::strerror(err)));
  }
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::send(fd, request + done, size - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server may close on a bad request before reading it all
    done += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string answer;
  const auto start = std::chrono::steady_clock::now();
  char buf[16384];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      answer.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Finding("no complete answer within " + std::to_string(kAnswerTimeoutS) + " s");
    }
    break;  // EOF, or a reset after an unread request
  }
  ::close(fd);
  if (std::chrono::steady_clock::now() - start > std::chrono::seconds(kAnswerTimeoutS)) {
    Finding("the answer took over " + std::to_string(kAnswerTimeoutS) + " s");
  }
  return answer;
}

void CheckScrape(int port, bool auth) {
  const std::string request =
      std::string("GET /metrics HTTP/1.1\r\nHost: fuzz\r\n") + (auth ? kAuthHeader : "") + "\r\n";
  const std::string answer = Exchange(port, request.data(), request.size());
  if (answer.rfind("HTTP/1.1 200 ", 0) != 0 ||
      answer.find("ringpilot_steps_total{job=\"fuzz\",rank=\"0\"} 7") == std::string::npos) {
    Finding("a well-formed scrape failed afterwards: " + answer.substr(0, 200));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Server& server = TheServer();
  const bool use_auth = (data[0] & 1) != 0;
  const int port = use_auth ? server.auth->port() : server.open->port();
  const std::string answer = Exchange(port, reinterpret_cast<const char*>(data + 1), size - 1);
  // civetweb answers in the request's protocol version ("HTTP/9.9 505 ...").
  if (!answer.empty() && answer.rfind("HTTP/", 0) != 0) {
    Finding("answer does not start with a status line: " + answer.substr(0, 200));
  }
  static uint64_t inputs = 0;
  if (++inputs % 16 == 0) {
    CheckScrape(server.open->port(), false);
    CheckScrape(server.auth->port(), true);
  }
  return 0;
}
