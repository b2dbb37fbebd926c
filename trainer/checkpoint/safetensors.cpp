#include "trainer/checkpoint/safetensors.h"

#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "base/files.h"

namespace ringpilot::trainer::checkpoint {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian: copy bytes on a big-endian host");

// The header is padded with spaces to a multiple of this, as the reference writer does, so
// the data starts aligned.
constexpr size_t kHeaderAlign = 8;

}  // namespace

std::string SafetensorsDtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "F32";
    case at::kDouble:
      return "F64";
    case at::kHalf:
      return "F16";
    case at::kBFloat16:
      return "BF16";
    case at::kLong:
      return "I64";
    case at::kInt:
      return "I32";
    case at::kShort:
      return "I16";
    case at::kChar:
      return "I8";
    case at::kByte:
      return "U8";
    case at::kBool:
      return "BOOL";
    default:
      throw CheckpointError(std::string("safetensors has no dtype for ") + c10::toString(type));
  }
}

std::string EncodeSafetensors(const std::vector<NamedTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const NamedTensor& entry : tensors) {
    if (entry.name.empty() || entry.name == "__metadata__" || !names.insert(entry.name).second) {
      throw CheckpointError("safetensors: tensor name '" + entry.name +
                            "' is empty, reserved or repeated");
    }
    const at::Tensor t = entry.tensor.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = t.nbytes();
    header[entry.name] = {{"dtype", SafetensorsDtype(t.scalar_type())},
                          {"shape", t.sizes().vec()},
                          {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(t);
  }
  std::string text = header.dump();
  text.append((kHeaderAlign - text.size() % kHeaderAlign) % kHeaderAlign, ' ');
  std::string out(8 + text.size() + offset, '\0');
  const uint64_t length = text.size();
  std::memcpy(out.data(), &length, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  char* cursor = out.data() + 8 + text.size();
  for (const at::Tensor& t : data) {
    if (t.nbytes() > 0) std::memcpy(cursor, t.data_ptr(), t.nbytes());
    cursor += t.nbytes();
  }
  return out;
}

void WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  base::WriteFileAtomically(path, EncodeSafetensors(tensors, metadata));
}

}  // namespace ringpilot::trainer::checkpoint
