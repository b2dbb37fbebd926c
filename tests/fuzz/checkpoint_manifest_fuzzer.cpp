// libFuzzer target: verifying a checkpoint directory against its manifest.json
// (trainer/checkpoint/manifest.h), what every rank does on resume and `ringpilot export`
// on its checkpoint. The directory holds a state.pt of fixed content and the manifest the
// input makes: when the first byte is even, the rest of the input is the manifest text
// (the JSON parser and everything after it); when odd, the rest drives a generator that
// writes a manifest of the right shape with each field left out or given a value of any
// JSON type (what byte mutations of JSON text rarely reach). Contract checked:
// VerifyCheckpointDir returns or throws CheckpointError (any other exception escapes and
// ends the run as a finding), and what verifies names this directory.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_util.h"
#include "trainer/checkpoint/manifest.h"
#include "trainer/checkpoint/sha256.h"

namespace {

using nlohmann::json;
using ringpilot::trainer::checkpoint::kStateFile;

const std::string kState = "ringpilot fuzz state\n";

const std::string& CheckpointDir() {
  static const std::string dir = [] {
    const std::string d = ringpilot::fuzz::ScratchDir() + "/step-00000010";
    ringpilot::base::MakeDirs(d);
    ringpilot::fuzz::WriteFile(d + "/" + kStateFile, kState);
    return d;
  }();
  return dir;
}

// A value of any JSON type; `good` is what a valid manifest would hold there.
json AnyValue(FuzzedDataProvider& in, const json& good, int depth = 0) {
  switch (in.ConsumeIntegralInRange(0, 11)) {
    case 0:
      return nullptr;
    case 1:
      return in.ConsumeBool();
    case 2:
      return in.ConsumeIntegral<int64_t>();
    case 3:
      return in.ConsumeIntegral<uint64_t>();
    case 4:
      return in.ConsumeIntegralInRange<int64_t>(-2, 100);
    case 5:
      return in.ConsumeFloatingPoint<double>();
    case 6:
      return in.ConsumeRandomLengthString(80);
    case 7: {
      json a = json::array();
      if (depth < 3) {
        for (int i = in.ConsumeIntegralInRange(0, 3); i > 0; --i)
          a.push_back(AnyValue(in, good, depth + 1));
      }
      return a;
    }
    case 8: {
      json o = json::object();
      if (depth < 3) {
        for (int i = in.ConsumeIntegralInRange(0, 3); i > 0; --i) {
          o[in.ConsumeRandomLengthString(12)] = AnyValue(in, good, depth + 1);
        }
      }
      return o;
    }
    default:
      return good;
  }
}

std::string GeneratedManifest(FuzzedDataProvider& in) {
  const std::string digest = [] {
    ringpilot::trainer::checkpoint::Sha256 sha;
    sha.Update(kState.data(), kState.size());
    return sha.HexDigest();
  }();
  json meta = json::object();
  const auto field = [&in](json& o, const std::string& key, const json& good) {
    if (in.ConsumeIntegralInRange(0, 7) != 0) o[key] = AnyValue(in, good);  // else left out
  };
  field(meta, "bytes", static_cast<int64_t>(kState.size()));
  field(meta, "sha256_chunk_bytes", int64_t{67108864});
  field(meta, "sha256_chunks", json::array({digest}));
  field(meta, "sha256", digest);
  json files = json::object();
  for (int i = in.ConsumeIntegralInRange(0, 3); i > 0; --i) {
    const std::string names[] = {kStateFile,
                                 "manifest.json",
                                 "",
                                 "..",
                                 "../step-00000010/state.pt",
                                 "missing.bin",
                                 in.ConsumeRandomLengthString(16)};
    files[names[in.ConsumeIntegralInRange(0, 6)]] = in.ConsumeBool() ? meta : AnyValue(in, meta);
  }
  json m = json::object();
  field(m, "format", ringpilot::trainer::checkpoint::kCheckpointFormat);
  field(m, "step", 10);
  field(m, "world_size", 2);
  field(m, "job", "name: fuzz\n");
  field(m, "created_unix", 1764000000.5);
  field(m, "files", files);
  // Random strings need not be UTF-8; the text mode covers raw bytes.
  return m.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringpilot::trainer::checkpoint;
  if (size < 1) return 0;
  const std::string& dir = CheckpointDir();
  if ((data[0] & 1) == 0) {
    ringpilot::fuzz::WriteFile(dir + "/" + kManifestFile, data + 1, size - 1);
  } else {
    FuzzedDataProvider in(data + 1, size - 1);
    ringpilot::fuzz::WriteFile(dir + "/" + kManifestFile, GeneratedManifest(in));
  }
  try {
    const CheckpointInfo info = VerifyCheckpointDir(dir);
    if (info.path != dir) __builtin_trap();
  } catch (const CheckpointError&) {
  }
  return 0;
}
