// ringpilot-config-reference: prints the job file reference (docs/config.md).
#include <iostream>

#include "config/job.h"

int main() {
  std::cout << ringpilot::config::RenderConfigReference();
  return std::cout.good() ? 0 : 1;
}
