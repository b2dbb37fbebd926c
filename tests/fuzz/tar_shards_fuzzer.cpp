// libFuzzer target: WebDataset tar shards (data.kind image_shards), indexed by
// OpenImageShards (data/image_source.h): ustar, GNU long names, pax path and size records.
// Input: the tar file. Contract checked: a shard is indexed or DataError is thrown; every
// indexed sample has a label in [-1, num_classes) and reads back exactly from inside the
// file.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/cifar.h"  // DataError
#include "data/image_source.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringpilot::data;
  const std::string path = ringpilot::fuzz::ScratchDir() + "/shard-000000.tar";
  ringpilot::fuzz::WriteFile(path, data, size);
  try {
    const std::unique_ptr<ImageSource> source = OpenImageShards({path});
    if (source->size() <= 0 || source->num_classes() <= 0) __builtin_trap();
    std::vector<uint8_t> bytes;
    std::string error;
    for (int64_t i = 0; i < std::min<int64_t>(source->size(), 256); ++i) {
      const int32_t label = source->label(i);
      if (label < -1 || label >= source->num_classes()) __builtin_trap();
      if (source->Describe(i).rfind(path + ":", 0) != 0) __builtin_trap();
      if (!source->Read(i, &bytes, &error) || bytes.size() > size) __builtin_trap();
      if (!bytes.empty() &&
          std::search(data, data + size, bytes.begin(), bytes.end()) == data + size) {
        __builtin_trap();
      }
    }
    (void)source->Summary();
  } catch (const DataError&) {
  }
  return 0;
}
