#include "metrics/free_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ringpilot::metrics {

bool PortBindable(const std::string& address, int port) {
  if (port <= 0 || port > 65535) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) return false;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

int FirstFreePortBlock(const std::string& address, int first, int count, int blocks) {
  for (int k = 0; k < blocks; ++k) {
    const int start = first + k * count;
    if (start <= 0 || start + count - 1 > 65535) return 0;
    bool free = true;
    for (int p = start; p < start + count && free; ++p) free = PortBindable(address, p);
    if (free) return start;
  }
  return 0;
}

}  // namespace ringpilot::metrics
