// Suite names start with "metrics_" so that `ctest -R metrics` selects them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "metrics/exporter.h"
#include "metrics/families.h"

namespace ringpilot::metrics {
namespace {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string error;  // set when no response could be read

  std::string Header(const std::string& lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? "<missing " + lower_name + ">" : it->second;
  }
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Minimal HTTP/1.1 client: one request, `Connection: close`, read to EOF.
HttpResponse Request(int port, const std::string& method, const std::string& path,
                     const std::vector<std::string>& extra_headers = {}) {
  HttpResponse response;
  const int fd = ConnectLoopback(port);
  if (fd < 0) {
    response.error = std::string("connect: ") + std::strerror(errno);
    return response;
  }
  std::string request = method + " " + path +
                        " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                        "\r\nConnection: close\r\n";
  for (const auto& header : extra_headers) request += header + "\r\n";
  request += "\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    response.error = "send failed";
    close(fd);
    return response;
  }
  std::string raw;
  char buffer[8192];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) raw.append(buffer, static_cast<size_t>(n));
  close(fd);

  const auto header_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || header_end == std::string::npos) {
    response.error = "malformed response: " + raw;
    return response;
  }
  response.status = std::stoi(raw.substr(9, 3));
  std::size_t line_start = raw.find("\r\n") + 2;
  while (line_start < header_end) {
    const std::size_t line_end = raw.find("\r\n", line_start);
    const std::string line = raw.substr(line_start, line_end - line_start);
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      response.headers[Lower(line.substr(0, colon))] = value;
    }
    line_start = line_end + 2;
  }
  response.body = raw.substr(header_end + 4);
  return response;
}

HttpResponse Get(int port, const std::string& path, const std::vector<std::string>& headers = {}) {
  return Request(port, "GET", path, headers);
}

std::string Base64(const std::string& in) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

ExporterOptions AnyPort() {
  ExporterOptions options;
  options.port = 0;
  return options;
}

// Threads of this process whose nice value (field 19 of /proc/self/task/T/stat) is `nice`.
int ThreadsWithNice(int nice) {
  int count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // from field 3, the state
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i) {
      if (i == 19 && std::stoi(field) == nice) ++count;
    }
  }
  return count;
}

template <class Fn>
std::string ExporterErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const ExporterError& e) {
    return e.what();
  }
  return "<no ExporterError thrown>";
}

bool EndsWith(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

class metrics_Exporter : public ::testing::Test {
 protected:
  metrics_Exporter() : families_({{"job", "test"}, {"rank", "0"}}) {
    families_.AddCounter("ringpilot_steps_total", "Steps.").Add({}).Increment(7);
    families_.AddHistogram("ringpilot_step_seconds", "Step time.")
        .Add({}, Histogram::BucketBoundaries{0.1, 1})
        .Observe(0.2);
  }
  Families families_;
};

TEST_F(metrics_Exporter, ServesMetricsOnAnEphemeralPort) {
  EXPECT_EQ(ExporterOptions().port, 0);  // no job default: the job config supplies the port
  Exporter exporter(families_.registry(), AnyPort());
  ASSERT_GT(exporter.port(), 0);
  EXPECT_EQ(exporter.url(), "http://127.0.0.1:" + std::to_string(exporter.port()) + "/metrics");
  const HttpResponse r = Get(exporter.port(), "/metrics");
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.Header("content-type"), kExpositionContentType);
  // prometheus::Exposer's own series first, then ours.
  EXPECT_TRUE(EndsWith(r.body, families_.Serialize())) << r.body;
  EXPECT_NE(r.body.find("# TYPE exposer_scrapes_total counter\n"), std::string::npos) << r.body;
  EXPECT_EQ(r.Header("content-length"), std::to_string(r.body.size()));
  EXPECT_NE(r.body.find("ringpilot_steps_total{job=\"test\",rank=\"0\"} 7\n"), std::string::npos);
}

// Scrapes take the CPU training leaves: every exporter thread (civetweb's master and
// workers, the connection gate) runs at nice 19 unless told otherwise; the caller's
// thread keeps its priority.
TEST_F(metrics_Exporter, ItsThreadsYieldToTraining) {
  EXPECT_EQ(ExporterOptions().thread_nice, 19);
  const int before = ThreadsWithNice(19);
  ExporterOptions options = AnyPort();
  options.threads = 3;
  {
    Exporter exporter(families_.registry(), options);
    ASSERT_EQ(Get(exporter.port(), "/metrics").status, 200);
    // Each civetweb thread lowers itself as it starts (init_thread): one request answered
    // does not mean every worker has started yet, so wait a while for the rest.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ThreadsWithNice(19) - before < options.threads + 2 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GE(ThreadsWithNice(19) - before, options.threads + 2);
    EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid))), 0);
  }
  options.thread_nice = 0;
  Exporter keeps(families_.registry(), options);
  ASSERT_EQ(Get(keeps.port(), "/metrics").status, 200);
  EXPECT_EQ(ThreadsWithNice(19), before);
  options.thread_nice = 20;
  EXPECT_EQ(ExporterErrorOf([&] { Exporter bad(families_.registry(), options); }),
            "metrics exporter: invalid thread_nice 20 (0..19)");
}

TEST_F(metrics_Exporter, GzipWhenTheClientAcceptsIt) {
  Exporter exporter(families_.registry(), AnyPort());
  const HttpResponse r = Get(exporter.port(), "/metrics", {"Accept-Encoding: gzip"});
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.Header("content-encoding"), "gzip");
  ASSERT_GE(r.body.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(r.body[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(r.body[1]), 0x8b);
}

TEST_F(metrics_Exporter, MetricsThatAreGoneAreLeftOut) {
  auto gone = std::make_unique<Families>(Labels{{"rank", "9"}});
  gone->AddGauge("ringpilot_gone", "Gone.").Add({}).Set(1);
  Exporter exporter(gone->registry(), AnyPort());
  EXPECT_NE(Get(exporter.port(), "/metrics").body.find("ringpilot_gone"), std::string::npos);
  gone.reset();
  const HttpResponse r = Get(exporter.port(), "/metrics");
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body.find("ringpilot_gone"), std::string::npos) << r.body;
}

TEST_F(metrics_Exporter, QueryStringIsIgnored) {
  Exporter exporter(families_.registry(), AnyPort());
  EXPECT_EQ(Get(exporter.port(), "/metrics?x=1").status, 200);
}

TEST_F(metrics_Exporter, IndexLinksMetricsAndOtherPathsAre404) {
  Exporter exporter(families_.registry(), AnyPort());
  const HttpResponse index = Get(exporter.port(), "/");
  ASSERT_EQ(index.status, 200) << index.error;
  EXPECT_NE(index.body.find("href=\"/metrics\""), std::string::npos) << index.body;
  EXPECT_EQ(Get(exporter.port(), "/nope").status, 404);
  EXPECT_EQ(Get(exporter.port(), "/metrics/").status, 404);
  EXPECT_EQ(Get(exporter.port(), "/metricsx").status, 404);
}

TEST_F(metrics_Exporter, HeadHasNoBodyAndOtherMethodsAre405) {
  Exporter exporter(families_.registry(), AnyPort());
  const HttpResponse head = Request(exporter.port(), "HEAD", "/metrics");
  ASSERT_EQ(head.status, 200) << head.error;
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(head.Header("content-type"), kExpositionContentType);
  const HttpResponse post = Request(exporter.port(), "POST", "/metrics", {"Content-Length: 0"});
  EXPECT_EQ(post.status, 405) << post.error;
  EXPECT_EQ(post.Header("allow"), "GET, HEAD");
}

TEST_F(metrics_Exporter, SecondExporterOnSamePortThrowsClearError) {
  Exporter first(families_.registry(), AnyPort());
  ExporterOptions same;
  same.port = first.port();
  const std::string error = ExporterErrorOf([&] { Exporter second(families_.registry(), same); });
  EXPECT_EQ(error, "metrics exporter: cannot listen on 127.0.0.1:" + std::to_string(first.port()) +
                       ": Address already in use");
  EXPECT_EQ(Get(first.port(), "/metrics").status, 200);  // the first one is unharmed
}

// A second job on the host: its rank steps over the taken port by whole blocks.
TEST_F(metrics_Exporter, ATakenPortMovesUpByBlocks) {
  Exporter first(families_.registry(), AnyPort());
  ExporterOptions next;
  next.port = first.port();
  next.port_step = 3;
  next.port_tries = 4;
  std::unique_ptr<Exporter> second;
  // The block above may be taken by another process too: the test only needs one of the
  // next ports, in steps of 3.
  ASSERT_NO_THROW(second = std::make_unique<Exporter>(families_.registry(), next));
  EXPECT_GT(second->port(), first.port());
  EXPECT_EQ((second->port() - first.port()) % 3, 0);
  EXPECT_EQ(Get(second->port(), "/metrics").status, 200);
  // Every try taken: the error names the ports tried.
  ExporterOptions none;
  none.port = first.port();
  none.port_step = second->port() - first.port();
  none.port_tries = 2;
  EXPECT_EQ(ExporterErrorOf([&] { Exporter third(families_.registry(), none); }),
            "metrics exporter: cannot listen on 127.0.0.1:" + std::to_string(first.port()) +
                " nor on the next 1 port(s) " + std::to_string(second->port()) + ".." +
                std::to_string(second->port()) + " (step " + std::to_string(none.port_step) +
                "): Address already in use");
}

TEST_F(metrics_Exporter, InvalidOptionsThrow) {
  ExporterOptions o = AnyPort();
  o.bind = "999.1.1.1";
  EXPECT_NE(ExporterErrorOf([&] { Exporter e(families_.registry(), o); }).find("999.1.1.1:0"),
            std::string::npos);
  o.bind = "::1";
  EXPECT_NE(ExporterErrorOf([&] { Exporter e(families_.registry(), o); }).find("IPv6"),
            std::string::npos);
  o.bind = "192.0.2.1";  // TEST-NET-1: valid syntax, not an address of this host
  EXPECT_NE(ExporterErrorOf([&] {
              Exporter e(families_.registry(), o);
            }).find("cannot listen on 192.0.2.1:0: Cannot assign requested address"),
            std::string::npos);
  o = AnyPort();
  o.port = 70000;
  EXPECT_NE(
      ExporterErrorOf([&] { Exporter e(families_.registry(), o); }).find("invalid port 70000"),
      std::string::npos);
  o = AnyPort();
  o.threads = 0;
  EXPECT_THROW(Exporter(families_.registry(), o), ExporterError);
  o = AnyPort();
  o.basic_auth_user = "only-user";
  EXPECT_NE(
      ExporterErrorOf([&] { Exporter e(families_.registry(), o); }).find("basic_auth_password"),
      std::string::npos);
  o.basic_auth_user = "a:b";
  o.basic_auth_password = "p";
  EXPECT_THROW(Exporter(families_.registry(), o), ExporterError);
}

TEST_F(metrics_Exporter, HostNameBindResolvesToIpv4) {
  ExporterOptions o = AnyPort();
  o.bind = "localhost";
  Exporter exporter(families_.registry(), o);
  EXPECT_EQ(Get(exporter.port(), "/metrics").status, 200);
  EXPECT_EQ(exporter.url(), "http://localhost:" + std::to_string(exporter.port()) + "/metrics");
}

TEST_F(metrics_Exporter, TlsErrorsNameTheCertificate) {
  ExporterOptions o = AnyPort();
  o.tls_cert_pem = "/nonexistent/ringpilot-cert.pem";
  const std::string missing = ExporterErrorOf([&] { Exporter e(families_.registry(), o); });
  EXPECT_NE(missing.find("TLS certificate /nonexistent/ringpilot-cert.pem: cannot read"),
            std::string::npos)
      << missing;

  // A file that is not a certificate: whether or not this civetweb can load OpenSSL,
  // start-up fails and the message says HTTPS/TLS and names the file.
  char path[] = "/tmp/ringpilot_cert_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "not a certificate\n";
  o.tls_cert_pem = path;
  const std::string bad = ExporterErrorOf([&] { Exporter e(families_.registry(), o); });
  std::remove(path);
  EXPECT_EQ(bad.rfind("metrics exporter: ", 0), 0u) << bad;
  EXPECT_TRUE(bad.find("HTTPS") != std::string::npos || bad.find("TLS") != std::string::npos)
      << bad;
  EXPECT_NE(bad.find(path), std::string::npos) << bad;
}

TEST_F(metrics_Exporter, BasicAuth) {
  ExporterOptions o = AnyPort();
  o.basic_auth_user = "prometheus";
  o.basic_auth_password = "s3cret:with colon";
  Exporter exporter(families_.registry(), o);

  const HttpResponse anonymous = Get(exporter.port(), "/metrics");
  EXPECT_EQ(anonymous.status, 401) << anonymous.error;
  EXPECT_EQ(anonymous.Header("www-authenticate").rfind("Basic realm=", 0), 0u);
  EXPECT_EQ(anonymous.body.find("ringpilot_"), std::string::npos);
  EXPECT_EQ(Get(exporter.port(), "/nope").status, 401);  // no path probing without auth

  const std::string good = "Authorization: Basic " + Base64("prometheus:s3cret:with colon");
  const HttpResponse ok = Get(exporter.port(), "/metrics", {good});
  EXPECT_EQ(ok.status, 200) << ok.error;
  EXPECT_TRUE(EndsWith(ok.body, families_.Serialize())) << ok.body;
  EXPECT_EQ(Get(exporter.port(), "/metrics",
                {"authorization:   basic   " + Base64("prometheus:s3cret:with colon")})
                .status,
            200);

  EXPECT_EQ(Get(exporter.port(), "/metrics", {"Authorization: Basic " + Base64("prometheus:wrong")})
                .status,
            401);
  EXPECT_EQ(Get(exporter.port(), "/metrics", {"Authorization: Basic !!!notbase64"}).status, 401);
  EXPECT_EQ(Get(exporter.port(), "/metrics", {"Authorization: Bearer abc"}).status, 401);
}

TEST_F(metrics_Exporter, ScrapeCallbackRunsBeforeEveryScrape) {
  Gauge& refreshed = families_.AddGauge("refreshed", "Set by the scrape callback.").Add({});
  Exporter exporter(families_.registry(), AnyPort());
  std::atomic<int> calls{0};
  exporter.SetScrapeCallback([&] { refreshed.Set(++calls); });
  EXPECT_NE(Get(exporter.port(), "/metrics").body.find("refreshed{job=\"test\",rank=\"0\"} 1\n"),
            std::string::npos);
  EXPECT_NE(Get(exporter.port(), "/metrics").body.find("refreshed{job=\"test\",rank=\"0\"} 2\n"),
            std::string::npos);
  EXPECT_EQ(Get(exporter.port(), "/").status, 200);
  EXPECT_EQ(Request(exporter.port(), "HEAD", "/metrics").status, 200);
  EXPECT_EQ(calls.load(), 2);  // only GET /metrics runs it

  exporter.SetScrapeCallback([] { throw std::runtime_error("sensor gone"); });
  const HttpResponse failed = Get(exporter.port(), "/metrics");
  EXPECT_EQ(failed.status, 500);
  EXPECT_NE(failed.body.find("sensor gone"), std::string::npos) << failed.body;

  exporter.SetScrapeCallback({});
  EXPECT_EQ(Get(exporter.port(), "/metrics").status, 200);
}

TEST_F(metrics_Exporter, ConcurrentScrapesWhileTrainingUpdates) {
  Counter& steps = families_.AddCounter("ringpilot_steps_total", "Steps.").Add({});
  ExporterOptions o = AnyPort();
  o.threads = 4;
  Exporter exporter(families_.registry(), o);
  std::atomic<bool> stop{false};
  std::thread trainer([&] {
    while (!stop.load(std::memory_order_relaxed)) steps.Increment();
  });
  std::vector<std::thread> scrapers;
  std::atomic<int> ok{0};
  for (int s = 0; s < 3; ++s) {
    scrapers.emplace_back([&] {
      double last = 0;
      for (int i = 0; i < 20; ++i) {
        const HttpResponse r = Get(exporter.port(), "/metrics");
        const std::string key = "ringpilot_steps_total{job=\"test\",rank=\"0\"} ";
        const auto at = r.body.find(key);
        if (r.status != 200 || at == std::string::npos) continue;
        const double value = std::stod(r.body.substr(at + key.size()));
        if (value >= last) ++ok;
        last = value;
      }
    });
  }
  for (auto& t : scrapers) t.join();
  stop = true;
  trainer.join();
  EXPECT_EQ(ok.load(), 60);
}

TEST_F(metrics_Exporter, DestructorStopsListening) {
  int port = 0;
  {
    Exporter exporter(families_.registry(), AnyPort());
    port = exporter.port();
    ASSERT_EQ(Get(port, "/metrics").status, 200);
  }
  const HttpResponse after = Get(port, "/metrics");
  EXPECT_EQ(after.status, 0);
  EXPECT_NE(after.error.find("connect"), std::string::npos) << after.error;
}

}  // namespace
}  // namespace ringpilot::metrics
