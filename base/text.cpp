#include "base/text.h"

#include <cstdio>

namespace ringpilot::base {

std::string FormatFixed(double v, int decimals) {
  char small[64];
  const int n = std::snprintf(small, sizeof small, "%.*f", decimals, v);
  if (n < 0) return "";
  if (static_cast<std::size_t>(n) < sizeof small)
    return std::string(small, static_cast<std::size_t>(n));
  // 1e300 with two decimals needs about 300 characters.
  std::string big(static_cast<std::size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), "%.*f", decimals, v);
  big.resize(static_cast<std::size_t>(n));
  return big;
}

}  // namespace ringpilot::base
