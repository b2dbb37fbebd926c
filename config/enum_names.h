// Private to config/: the spellings of the job's enums, indexed by the enum's value, for
// the key table (schema.cpp: the allowed values) and ToString (enum_names.cpp). One
// definition each: a new enum value gets its name here.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringpilot::config::detail {

// Constant-initialized: ToString is safe at any time.
inline constexpr const char* kDeviceNames[] = {"cpu", "cuda", "auto"};
inline constexpr const char* kBackendNames[] = {"local", "mpi", "slurm", "k8s"};
inline constexpr const char* kPrecisionNames[] = {"fp32", "bf16"};
inline constexpr const char* kOptimizerNames[] = {"sgd", "adamw"};
inline constexpr const char* kLrScheduleNames[] = {"constant", "cosine", "step", "polynomial"};
inline constexpr const char* kGradDtypeNames[] = {"fp32", "bf16"};
inline constexpr const char* kCtaPolicyNames[] = {"default", "efficiency", "zero"};
inline constexpr const char* kBufferRegistrationNames[] = {"none", "register", "symmetric"};
inline constexpr const char* kBindNames[] = {"auto", "numa", "cores", "none"};
inline constexpr const char* kModelNames[] = {"resnet18-cifar", "resnet50", "bert-tiny",
                                              "bert-base"};
inline constexpr const char* kGpuDecodeNames[] = {"auto", "true", "false"};
inline constexpr const char* kDataKinds[] = {"synthetic", "cifar", "image_folder", "image_shards",
                                             "tokens"};

template <std::size_t N>
std::vector<std::string> Names(const char* const (&names)[N]) {
  return std::vector<std::string>(names, names + N);
}

template <std::size_t N>
const char* NameOf(const char* const (&names)[N], int index) {
  return index >= 0 && static_cast<std::size_t>(index) < N ? names[index] : "?";
}

}  // namespace ringpilot::config::detail
