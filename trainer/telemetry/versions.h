// The library versions this trainer was compiled against and the ones it actually loaded
// (LibTorch, CUDA runtime and driver, cuDNN, NCCL, MPI): `ringpilot-trainer --versions`, the
// `ringpilot_build_info` labels, and the input of `ringpilot doctor`'s library_versions check.
// Nothing here needs a GPU or MPI_Init.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringpilot::trainer::telemetry {

/// Versions as dotted text ("13.0", "9.19.0", "2.28.9"); "" where not applicable (a CPU-only
/// build has no CUDA, cuDNN or NCCL) or not determinable (no driver: cuda_driver is "").
struct LibraryVersions {
  std::string torch;           ///< TORCH_VERSION (torch/version.h), "2.11.0"
  std::string cuda_compiled;   ///< CUDA_VERSION of the toolkit the trainer was compiled with
  std::string cuda_runtime;    ///< cudaRuntimeGetVersion of the libcudart loaded
  std::string cuda_driver;     ///< cudaDriverGetVersion: newest CUDA the driver supports
  std::string nvidia_driver;   ///< NVML nvmlSystemGetDriverVersion, "580.65.06"
  std::string cudnn_compiled;  ///< CUDNN_VERSION LibTorch was built with (versionCuDNN)
  std::string cudnn_loaded;    ///< cudnnGetVersion of the libcudnn loaded (versionRuntimeCuDNN)
  std::string nccl_compiled;   ///< NCCL_VERSION_CODE of the nccl.h ringpilot compiled against
  std::string nccl_loaded;     ///< ncclGetVersion of the libnccl loaded
  std::string nccl_path;       ///< file of the loaded libnccl (dladdr of ncclGetVersion)
  std::string mpi;             ///< first line of MPI_Get_library_version
  std::string mpi_standard;    ///< MPI_VERSION.MPI_SUBVERSION of the mpi.h compiled against
};

/// Queries this process: loads nothing new but libnvidia-ml (dlopen, when present); calls no
/// device API that needs a GPU; MPI need not be initialised.
LibraryVersions QueryLibraryVersions();

/// The `--versions` object: every field of LibraryVersions under its member's name, in order.
nlohmann::ordered_json VersionsJson(const LibraryVersions& v);

/// `ringpilot_build_info` labels: torch, cuda (runtime), cudnn (loaded), nccl (loaded), mpi
/// (library up to its first comma, "Open MPI v4.1.6"), driver (NVIDIA driver, else the CUDA
/// driver version); "none" for what is not there.
std::vector<std::pair<std::string, std::string>> BuildInfoLabels(const LibraryVersions& v);

/// 13000 -> "13.0" (CUDA_VERSION, cudaRuntimeGetVersion); "" for 0.
std::string CudaVersionText(int v);
/// cuDNN's version number: 91900 -> "9.19.0" (9.x: MAJOR*10000 + MINOR*100 + PATCH),
/// 8902 -> "8.9.2" (8.x and older: MAJOR*1000 + MINOR*100 + PATCH); "" for 0.
std::string CudnnVersionText(long v);
/// ncclGetVersion's number: 22809 -> "2.28.9" (MAJOR*10000 + MINOR*100 + PATCH since 2.9,
/// MAJOR*1000 + MINOR*100 + PATCH before); "" for 0.
std::string NcclVersionText(int v);

}  // namespace ringpilot::trainer::telemetry
