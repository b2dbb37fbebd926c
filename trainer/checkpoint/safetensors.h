// The safetensors format (https://github.com/huggingface/safetensors), written for
// `ringpilot export`: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw little-endian data, packed in header
// order. What torchvision, Hugging Face and safetensors.torch.load_file read.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainer/checkpoint/store.h"

namespace ringpilot::trainer::checkpoint {

/// The format's dtype name ("F32", "BF16", "I64", ...). Throws CheckpointError for a dtype
/// the format has no name for.
std::string SafetensorsDtype(at::ScalarType type);

/// The whole file: header and data. Tensors are copied to contiguous CPU memory (a
/// channels_last weight is written in its logical NCHW order). Names must be unique and
/// non-empty. `metadata` goes into the header's "__metadata__" (string values only).
/// Throws CheckpointError naming the offending tensor. Little-endian hosts only.
std::string EncodeSafetensors(const std::vector<NamedTensor>& tensors,
                              const std::map<std::string, std::string>& metadata);

/// EncodeSafetensors into `path`, written atomically (a temporary file renamed over it), so
/// an existing file is replaced whole or not at all. Throws base::FileError / CheckpointError.
void WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata);

}  // namespace ringpilot::trainer::checkpoint
