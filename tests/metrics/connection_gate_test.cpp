// metrics/connection_gate.h against a plain upstream server of the test's own, and the
// real Exporter behind it under abuse: idle and trickling clients, garbage, a 1 MB header.
// Suite names start with "metrics_" so that `ctest -R metrics` selects them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "metrics/connection_gate.h"
#include "metrics/exporter.h"
#include "metrics/families.h"

namespace ringpilot::metrics {
namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Everything until EOF (or the 5 s receive timeout).
std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// One request on a new connection: send, half-close, read the answer.
std::string Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return "<connect failed>";
  SendAll(fd, request);
  ::shutdown(fd, SHUT_WR);
  std::string answer = ReadAll(fd);
  ::close(fd);
  return answer;
}

// True when the server closed `fd` (EOF or reset) within `ms`.
bool ClosedWithin(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

// A blocking HTTP-ish server on loopback: reads each connection's request up to the blank
// line (and `Content-Length` bytes of body), answers with `body_bytes` bytes naming what it
// read, and counts the connections it accepted.
class Upstream {
 public:
  explicit Upstream(size_t body_bytes = 0) : body_bytes_(body_bytes) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    ::listen(fd_, 64);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~Upstream() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void Serve() {
    while (!stop_) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      ++accepted_;
      std::string request;
      char buf[4096];
      ssize_t n;
      while (request.find("\r\n\r\n") == std::string::npos &&
             (n = ::recv(c, buf, sizeof buf, 0)) > 0) {
        request.append(buf, static_cast<size_t>(n));
      }
      const auto cl = request.find("Content-Length: ");
      const size_t header_end = request.find("\r\n\r\n");
      if (cl != std::string::npos && header_end != std::string::npos) {
        const size_t want = header_end + 4 + std::stoul(request.substr(cl + 16));
        while (request.size() < want && (n = ::recv(c, buf, sizeof buf, 0)) > 0) {
          request.append(buf, static_cast<size_t>(n));
        }
      }
      std::string body = "read " + std::to_string(request.size()) + " bytes\n";
      body.resize(std::max(body.size(), body_bytes_), 'x');
      SendAll(c, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\nConnection: close\r\n\r\n" + body);
      ::close(c);
    }
  }

  const size_t body_bytes_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

ConnectionGateOptions GateOptions() {
  ConnectionGateOptions o;
  o.bind = "127.0.0.1";
  o.header_timeout_ms = 5000;
  o.max_header_bytes = 1024;
  o.max_pending = 64;
  return o;
}

TEST(metrics_ConnectionGate, RelaysACompleteRequestAndItsBodyBothWays) {
  Upstream upstream;
  ConnectionGate gate(GateOptions());
  gate.Start(upstream.port());
  const std::string get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string read = "read " + std::to_string(get.size()) + " bytes\n";
  EXPECT_EQ(Exchange(gate.port(), get),
            "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(read.size()) +
                "\r\nConnection: close\r\n\r\n" + read);
  // The body may come after the header, in later packets, longer than the header limit.
  const std::string body(5000, 'b');
  const std::string post = "POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n";
  const int fd = Connect(gate.port());
  ASSERT_GE(fd, 0);
  SendAll(fd, post);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  SendAll(fd, body);
  const std::string answer = ReadAll(fd);
  ::close(fd);
  EXPECT_NE(answer.find("read " + std::to_string(post.size() + body.size()) + " bytes"),
            std::string::npos)
      << answer;
  EXPECT_EQ(upstream.accepted(), 2);
}

TEST(metrics_ConnectionGate, LargeAnswerReachesASlowReaderIntact) {
  Upstream upstream(3 << 20);
  ConnectionGate gate(GateOptions());
  gate.Start(upstream.port());
  const int fd = Connect(gate.port());
  ASSERT_GE(fd, 0);
  SendAll(fd, "GET / HTTP/1.1\r\n\r\n");
  std::string answer;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
    answer.append(buf, static_cast<size_t>(n));
    if (answer.size() < (64u << 10)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::close(fd);
  const size_t header = answer.find("\r\n\r\n");
  ASSERT_NE(header, std::string::npos);
  EXPECT_EQ(answer.size() - header - 4, size_t{3} << 20);
}

TEST(metrics_ConnectionGate, IdleAndTricklingClientsNeverReachTheServer) {
  Upstream upstream;
  ConnectionGate gate(GateOptions());
  gate.Start(upstream.port());
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(Connect(gate.port()));
  for (int i = 0; i < 10; ++i) {
    const int fd = Connect(gate.port());
    SendAll(fd, "GET /metrics HTTP/1.1\r\nX-Slow: ");  // and never the rest
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(upstream.accepted(), 0);
  const auto start = Clock::now();
  EXPECT_EQ(Exchange(gate.port(), "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(upstream.accepted(), 1);
  for (const int fd : idle) ::close(fd);
}

TEST(metrics_ConnectionGate, OverlongHeaderIs431AndNeverReachesTheServer) {
  Upstream upstream;
  ConnectionGate gate(GateOptions());
  gate.Start(upstream.port());
  const std::string answer =
      Exchange(gate.port(), "GET / HTTP/1.1\r\nX-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 431 Request Header Fields Too Large\r\n", 0), 0u) << answer;
  EXPECT_EQ(upstream.accepted(), 0);
}

TEST(metrics_ConnectionGate, OldestPendingClientsMakeRoomAndSlowOnesTimeOut) {
  Upstream upstream;
  ConnectionGateOptions o = GateOptions();
  o.max_pending = 4;
  o.header_timeout_ms = 300;
  ConnectionGate gate(o);
  gate.Start(upstream.port());
  std::vector<int> fds;
  for (int i = 0; i < 6; ++i) {
    fds.push_back(Connect(gate.port()));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a known arrival order
  }
  EXPECT_TRUE(ClosedWithin(fds[0], 200));
  EXPECT_TRUE(ClosedWithin(fds[1], 200));
  EXPECT_FALSE(ClosedWithin(fds[5], 50));
  // The others run out of time.
  for (int i = 2; i < 6; ++i) EXPECT_TRUE(ClosedWithin(fds[i], 1000)) << i;
  for (const int fd : fds) ::close(fd);
  EXPECT_EQ(upstream.accepted(), 0);
}

TEST(metrics_ConnectionGate, PortInUseAndBadOptions) {
  ConnectionGate first(GateOptions());
  ConnectionGateOptions same = GateOptions();
  same.port = first.port();
  try {
    ConnectionGate second(same);
    ADD_FAILURE() << "a second gate bound port " << first.port();
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EADDRINUSE);
  }
  ConnectionGateOptions bad = GateOptions();
  bad.max_pending = 0;
  EXPECT_THROW(ConnectionGate{bad}, std::invalid_argument);
  bad = GateOptions();
  bad.bind = "localhost";
  EXPECT_THROW(ConnectionGate{bad}, std::invalid_argument);
}

// The real exporter (2 HTTP threads, as a rank runs it) while 200 clients sit idle, 50
// trickle a header, garbage arrives and a 1 MB header is sent: scrapes answer at once.
// Before the gate, 10 idle clients kept it from answering for 30 s.
TEST(metrics_ConnectionGate, ExporterKeepsAnsweringUnderAbuse) {
  Families families({{"job", "test"}, {"rank", "0"}});
  families.AddCounter("ringpilot_steps_total", "Steps.").Add({}).Increment(7);
  Exporter exporter(families.registry(), ExporterOptions{});
  const int port = exporter.port();
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(Connect(port));
  for (int i = 0; i < 50; ++i) {
    const int fd = Connect(port);
    SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: a");
    idle.push_back(fd);
  }
  for (const char* garbage :
       {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "GET\r\n\r\n", "\r\n\r\n",
        "GET /metrics HTTP/9.9\r\n\r\n", "GET /%%%%/../../x HTTP/1.1\r\n\r\n",
        "POST /metrics HTTP/1.1\r\nContent-Length: -5\r\n\r\n"}) {
    const std::string answer = Exchange(port, garbage);
    // civetweb answers in the request's protocol version ("HTTP/9.9 505 ...").
    EXPECT_TRUE(answer.empty() || answer.rfind("HTTP/", 0) == 0) << answer.substr(0, 80);
  }
  const std::string big =
      Exchange(port, "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n");
  EXPECT_EQ(big.rfind("HTTP/1.1 431 ", 0), 0u) << big.substr(0, 80);
  for (int i = 0; i < 20; ++i) {
    const auto start = Clock::now();
    const std::string answer = Exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(1)) << "scrape " << i;
    EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK", 0), 0u) << answer.substr(0, 80);
    EXPECT_NE(answer.find("ringpilot_steps_total{job=\"test\",rank=\"0\"} 7"), std::string::npos);
  }
  for (const int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace ringpilot::metrics
