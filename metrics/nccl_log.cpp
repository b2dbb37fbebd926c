#include "metrics/nccl_log.h"

#include <cctype>
#include <regex>

namespace ringpilot::metrics {

std::string ClassifyNcclTransport(const std::string& via) {
  auto starts = [&](const char* p) { return via.rfind(p, 0) == 0; };
  if (starts("P2P")) return "P2P";
  if (starts("SHM")) return "SHM";
  if (starts("NET/IB")) return "NET_IB";  // NET/IB/0, NET/IB/0/GDRDMA, NET/IBext
  if (starts("NET/Socket")) return "NET_Socket";
  if (starts("NET/")) {
    std::string name = via.substr(4, via.find('/', 4) - 4);
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name.empty() ? "" : "NET_" + name;
  }
  if (starts("COLLNET")) return "COLLNET";
  return "";
}

bool ParseNcclChannelLine(const std::string& line, int* from, int* to, std::string* transport) {
  if (line.find("NCCL INFO") == std::string::npos || line.find("Channel") == std::string::npos ||
      line.find(" via ") == std::string::npos) {
    return false;
  }
  static const std::regex kChannel(
      R"(Channel\s+\d+(?:/\d+)?\s*:\s*(\d{1,7})\[[^\]]*\]\s*->\s*(\d{1,7})\[[^\]]*\](?:\s*\[\w+\])?\s+via\s+(\S+))");
  std::smatch m;
  if (!std::regex_search(line, m, kChannel)) return false;
  const std::string t = ClassifyNcclTransport(m[3].str());
  if (t.empty()) return false;
  *from = std::stoi(m[1].str());
  *to = std::stoi(m[2].str());
  *transport = t;
  return true;
}

std::map<int, std::set<std::string>> NcclPeerTransports(std::istream& log, int rank) {
  std::map<int, std::set<std::string>> peers;
  for (std::string line; std::getline(log, line);) {
    int from = 0, to = 0;
    std::string t;
    if (!ParseNcclChannelLine(line, &from, &to, &t)) continue;
    if (from != rank && to != rank) continue;  // another rank's line in a shared file
    const int peer = from == rank ? to : from;
    if (peer != rank) peers[peer].insert(t);
  }
  return peers;
}

}  // namespace ringpilot::metrics
