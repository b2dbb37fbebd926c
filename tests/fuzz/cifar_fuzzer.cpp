// libFuzzer target: CIFAR-10/100 binary batch files (data/cifar.h). Input: the file's
// bytes; the first byte picks the variant (even: CIFAR-10, odd: CIFAR-100) and the rest is
// the file (named batch.bin: a distribution name, data_batch_1.bin, would have to hold
// 10,000 records). Contract checked: CountCifarRecords and ReadCifar agree or both throw
// DataError; every label read is a class of the variant.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/cifar.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringpilot::data;
  if (size < 1) return 0;
  const CifarVariant variant = (data[0] & 1) ? CifarVariant::kCifar100 : CifarVariant::kCifar10;
  const std::string path = ringpilot::fuzz::ScratchDir() + "/batch.bin";
  ringpilot::fuzz::WriteFile(path, data + 1, size - 1);
  int64_t counted = -1;
  try {
    counted = CountCifarRecords({path}, variant);
  } catch (const DataError&) {
  }
  try {
    const CifarSet set = ReadCifar({path}, variant);
    if (set.size() != counted) __builtin_trap();
    if (set.pixels.size() != static_cast<size_t>(set.size()) * kCifarImageBytes) __builtin_trap();
    for (const int32_t label : set.labels) {
      if (label < 0 || label >= set.num_classes) __builtin_trap();
    }
  } catch (const DataError&) {
  }
  return 0;
}
