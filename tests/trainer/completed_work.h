// Test helper: a comm::Work that is already complete, for fake communicators.
#pragma once

#include "comm/communicator.h"

namespace ringpilot::trainer {

class CompletedWork : public comm::Work {
 public:
  bool Test() override { return true; }
  void Wait() override {}
};

}  // namespace ringpilot::trainer
