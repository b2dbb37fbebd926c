#include "metrics/connection_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "base/thread_priority.h"

namespace ringpilot::metrics {
namespace {

// Bytes buffered per direction of a relayed connection before reading that side pauses.
constexpr std::size_t kRelayBufferBytes = 64 * 1024;
constexpr int kMaxEvents = 64;
constexpr char kTooLarge[] =
    "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; "
    "charset=utf-8\r\nContent-Length: 36\r\nConnection: close\r\n\r\n"
    "431 Request Header Fields Too Large\n";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void ThrowErrno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// One client connection: waiting for its header, then relayed to the server.
struct Conn {
  int client = -1;
  int upstream = -1;
  bool relaying = false;
  bool connecting = false;     // upstream connect() in progress
  bool client_eof = false;     // the client closed its side: pass it on once `up` is sent
  bool upstream_shut = false;  // ... which was done
  bool upstream_eof = false;   // the server finished its answer
  std::string up;              // client -> server bytes not yet written
  std::string down;            // server -> client bytes not yet written
  int64_t deadline_ms = 0;     // header complete by, or the next byte moved by
  uint64_t serial = 0;         // arrival order: the oldest pending one goes first
};

// End of an HTTP request header ("\r\n\r\n", or the "\n\n" that civetweb accepts too),
// searching from `from` on.
bool HeaderComplete(const std::string& s, std::size_t from) {
  for (std::size_t i = from; i + 1 < s.size(); ++i) {
    if (s[i] != '\n') continue;
    if (s[i + 1] == '\n') return true;
    if (i + 2 < s.size() && s[i + 1] == '\r' && s[i + 2] == '\n') return true;
  }
  return false;
}

class Relay {
 public:
  Relay(const ConnectionGateOptions& options, int listen_fd, int wake_fd, int upstream_port)
      : options_(options),
        listen_fd_(listen_fd),
        wake_fd_(wake_fd),
        upstream_port_(upstream_port),
        epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)) {
    if (epoll_fd_ < 0) ThrowErrno("epoll_create1");
    Watch(listen_fd_, EPOLLIN, EPOLL_CTL_ADD);
    Watch(wake_fd_, EPOLLIN, EPOLL_CTL_ADD);
  }
  ~Relay() {
    while (!conns_.empty()) Close(conns_.begin()->second.get());
    ::close(epoll_fd_);
  }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  void Run() {
    epoll_event events[kMaxEvents];
    while (true) {
      const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, WaitMs());
      if (n < 0 && errno != EINTR) return;  // cannot happen with valid descriptors
      for (int i = 0; i < std::max(n, 0); ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd_) return;
        if (fd == listen_fd_) {
          Accept();
          continue;
        }
        const auto it = by_fd_.find(fd);
        if (it == by_fd_.end()) continue;  // closed by an earlier event of this batch
        Conn* c = it->second;
        if (fd == c->client) {
          OnClient(c, events[i].events);
        } else {
          OnUpstream(c, events[i].events);
        }
      }
      Expire();
    }
  }

 private:
  void Watch(int fd, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, op, fd, &ev);
  }

  int WaitMs() const {
    if (by_deadline_.empty()) return 1000;
    return static_cast<int>(std::clamp<int64_t>(by_deadline_.begin()->first - NowMs(), 0, 1000));
  }

  void SetDeadline(Conn* c, int64_t deadline_ms) {
    by_deadline_.erase({c->deadline_ms, c->serial});
    c->deadline_ms = deadline_ms;
    by_deadline_.insert({c->deadline_ms, c->serial});
  }

  void Accept() {
    while (true) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        // Out of descriptors: the oldest idle client makes room (else the listening socket,
        // level-triggered, would wake this loop without end).
        if ((errno == EMFILE || errno == ENFILE) && !pending_.empty()) {
          Close(conns_.at(*pending_.begin()).get());
          continue;
        }
        return;  // EAGAIN: all taken; other errors concern that one connection
      }
      if (static_cast<int>(pending_.size()) >= options_.max_pending) {
        Close(conns_.at(*pending_.begin()).get());
      }
      auto conn = std::make_unique<Conn>();
      Conn* c = conn.get();
      c->client = fd;
      c->serial = next_serial_++;
      conns_.emplace(c->serial, std::move(conn));
      by_fd_[fd] = c;
      pending_.insert(c->serial);
      c->deadline_ms = NowMs() + options_.header_timeout_ms;
      by_deadline_.insert({c->deadline_ms, c->serial});
      Watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
    }
  }

  void Close(Conn* c) {
    for (const int fd : {c->client, c->upstream}) {
      if (fd < 0) continue;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      by_fd_.erase(fd);
      ::close(fd);
    }
    by_deadline_.erase({c->deadline_ms, c->serial});
    pending_.erase(c->serial);
    conns_.erase(c->serial);  // frees c
  }

  void Expire() {
    const int64_t now = NowMs();
    while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
      Close(conns_.at(by_deadline_.begin()->second).get());
    }
  }

  // Reads what the client sent. While pending: until the header is complete (then relay),
  // too long (431) or the client hangs up (relay what came, civetweb answers it).
  void OnClient(Conn* c, uint32_t events) {
    if (c->relaying) {
      // Gone both ways (reset, or closed after a half-close): nothing can be delivered.
      if (events & (EPOLLERR | EPOLLHUP)) return Close(c);
      if (events & (EPOLLIN | EPOLLRDHUP)) ReadInto(c, c->client, &c->up, &c->client_eof);
      if (events & EPOLLOUT) WriteFrom(c, c->client, &c->down);
      return Update(c);
    }
    const std::size_t before = c->up.size();
    char buf[16384];
    while (c->up.size() <= options_.max_header_bytes) {
      const ssize_t n = ::recv(c->client, buf, sizeof buf, 0);
      if (n > 0) {
        c->up.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) c->client_eof = true;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return Close(c);
      break;
    }
    if (c->up.size() > options_.max_header_bytes) {
      [[maybe_unused]] const ssize_t w =
          ::send(c->client, kTooLarge, sizeof kTooLarge - 1, MSG_NOSIGNAL);
      return Close(c);
    }
    const bool complete = !options_.inspect_headers
                              ? !c->up.empty()
                              : HeaderComplete(c->up, before >= 2 ? before - 2 : 0);
    if (complete || (c->client_eof && !c->up.empty())) return StartRelay(c);
    if (c->client_eof || (events & (EPOLLERR | EPOLLHUP))) return Close(c);
  }

  void StartRelay(Conn* c) {
    pending_.erase(c->serial);
    c->relaying = true;
    c->upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->upstream < 0) return Close(c);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(upstream_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(c->upstream, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      if (errno != EINPROGRESS) return Close(c);
      c->connecting = true;
    }
    by_fd_[c->upstream] = c;
    Watch(c->upstream, 0, EPOLL_CTL_ADD);
    SetDeadline(c, NowMs() + options_.header_timeout_ms);
    Update(c);
  }

  void OnUpstream(Conn* c, uint32_t events) {
    if (c->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(c->upstream, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return Close(c);
      c->connecting = false;
    }
    if (events & EPOLLIN) ReadInto(c, c->upstream, &c->down, &c->upstream_eof);
    if (!c->connecting && (events & EPOLLOUT)) WriteFrom(c, c->upstream, &c->up);
    if ((events & EPOLLERR) && !(events & EPOLLIN)) return Close(c);
    Update(c);
  }

  void ReadInto(Conn* c, int fd, std::string* buffer, bool* eof) {
    char buf[16384];
    while (buffer->size() < kRelayBufferBytes) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        buffer->append(buf, static_cast<std::size_t>(n));
        SetDeadline(c, NowMs() + options_.header_timeout_ms);
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) *eof = true;
      return;
    }
  }

  void WriteFrom(Conn* c, int fd, std::string* buffer) {
    while (!buffer->empty()) {
      const ssize_t n = ::send(fd, buffer->data(), buffer->size(), MSG_NOSIGNAL);
      if (n > 0) {
        buffer->erase(0, static_cast<std::size_t>(n));
        SetDeadline(c, NowMs() + options_.header_timeout_ms);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      buffer->clear();  // that side is gone: nothing more can be delivered to it
      if (fd == c->client) c->upstream_eof = true;
      return;
    }
  }

  // Re-arms both descriptors for what each direction needs now (level-triggered: a
  // condition that cannot be acted on must not stay armed), and closes the pair once the
  // server's answer is delivered or can no longer be.
  void Update(Conn* c) {
    if (c->upstream >= 0 && c->client_eof && c->up.empty() && !c->connecting && !c->upstream_shut) {
      ::shutdown(c->upstream, SHUT_WR);
      c->upstream_shut = true;
    }
    if (c->upstream_eof && c->down.empty()) return Close(c);
    if (c->upstream_eof && c->upstream >= 0) {  // the rest of the answer is in `down`
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->upstream, nullptr);
      by_fd_.erase(c->upstream);
      ::close(c->upstream);
      c->upstream = -1;
    }
    uint32_t client_events = 0;
    if (!c->client_eof && c->up.size() < kRelayBufferBytes) client_events |= EPOLLIN | EPOLLRDHUP;
    if (!c->down.empty()) client_events |= EPOLLOUT;
    Watch(c->client, client_events, EPOLL_CTL_MOD);
    if (c->upstream >= 0) {
      uint32_t upstream_events = 0;
      if (!c->upstream_eof && c->down.size() < kRelayBufferBytes) upstream_events |= EPOLLIN;
      if (c->connecting || !c->up.empty()) upstream_events |= EPOLLOUT;
      Watch(c->upstream, upstream_events, EPOLL_CTL_MOD);
    }
  }

  const ConnectionGateOptions& options_;
  const int listen_fd_;
  const int wake_fd_;
  const int upstream_port_;
  const int epoll_fd_;
  uint64_t next_serial_ = 0;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;     // by serial
  std::map<int, Conn*> by_fd_;                          // client and upstream descriptors
  std::set<uint64_t> pending_;                          // serials still reading a header
  std::set<std::pair<int64_t, uint64_t>> by_deadline_;  // (deadline, serial)
};

}  // namespace

ConnectionGate::ConnectionGate(ConnectionGateOptions options) : options_(std::move(options)) {
  if (options_.header_timeout_ms <= 0 || options_.max_header_bytes == 0 ||
      options_.max_pending <= 0 || options_.port < 0 || options_.port > 65535) {
    throw std::invalid_argument("ConnectionGate: options out of range");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options_.port));
  if (::inet_pton(AF_INET, options_.bind.c_str(), &addr.sin_addr) != 1) {
    throw std::invalid_argument("ConnectionGate: bind address '" + options_.bind +
                                "' is not a numeric IPv4 address");
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) ThrowErrno("socket");
  // A restarted rank takes its port back at once, though connections of its previous
  // attempt may still linger in TIME_WAIT (a port in use by a listener still fails).
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, SOMAXCONN) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    errno = err;
    ThrowErrno("bind");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    const int err = errno;
    ::close(listen_fd_);
    errno = err;
    ThrowErrno("eventfd");
  }
}

ConnectionGate::~ConnectionGate() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  ::close(wake_fd_);
  ::close(listen_fd_);
}

void ConnectionGate::Start(int upstream_port) {
  upstream_port_ = upstream_port;
  // The relay is built here, not in the thread, so that its errors reach the caller.
  auto relay = std::make_unique<Relay>(options_, listen_fd_, wake_fd_, upstream_port_);
  thread_ = std::thread([relay = std::move(relay), nice = options_.thread_nice] {
    base::SetThisThreadNice(nice);
    relay->Run();
  });
}

}  // namespace ringpilot::metrics
