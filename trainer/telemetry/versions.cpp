#include "trainer/telemetry/versions.h"

#include <dlfcn.h>
#include <mpi.h>

#include <memory>

#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include "topology/nvml_api.h"

#ifdef RINGPILOT_WITH_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace ringpilot::trainer::telemetry {
namespace {

std::string Dotted(int major, int minor, int patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string NvidiaDriverVersion() {
  std::string error;
  const std::unique_ptr<topology::NvmlApi> nvml =
      topology::NvmlApi::Load("libnvidia-ml.so.1", &error);
  if (!nvml || nvml->Init() != topology::kNvmlSuccess) return "";
  char buf[topology::kNvmlBufferSize] = {};
  std::string version;
  if (nvml->SystemGetDriverVersion &&
      nvml->SystemGetDriverVersion(buf, sizeof buf) == topology::kNvmlSuccess) {
    version = buf;
  }
  nvml->Shutdown();
  return version;
}

// The first line of MPI_Get_library_version (callable before MPI_Init since MPI 3.0).
std::string MpiLibraryFirstLine() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "";
  std::string s(buf, static_cast<std::size_t>(len > 0 ? len : 0));
  s = s.substr(0, s.find('\n'));
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

std::string CudaVersionText(int v) {
  if (v <= 0) return "";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string CudnnVersionText(long v) {
  if (v <= 0) return "";
  const int n = static_cast<int>(v);
  if (n >= 90000) return Dotted(n / 10000, (n % 10000) / 100, n % 100);
  return Dotted(n / 1000, (n % 1000) / 100, n % 100);
}

std::string NcclVersionText(int v) {
  if (v <= 0) return "";
  if (v >= 10000) return Dotted(v / 10000, (v % 10000) / 100, v % 100);
  return Dotted(v / 1000, (v % 1000) / 100, v % 100);
}

LibraryVersions QueryLibraryVersions() {
  LibraryVersions v;
  v.torch = TORCH_VERSION;
  v.mpi = MpiLibraryFirstLine();
  v.mpi_standard = std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION);
  v.nvidia_driver = NvidiaDriverVersion();
#ifdef RINGPILOT_WITH_CUDA
  v.cuda_compiled = CudaVersionText(CUDART_VERSION);
  int n = 0;
  if (cudaRuntimeGetVersion(&n) == cudaSuccess) v.cuda_runtime = CudaVersionText(n);
  n = 0;
  // 0 (and cudaSuccess) without a driver; an error on a broken install: both "".
  if (cudaDriverGetVersion(&n) == cudaSuccess) v.cuda_driver = CudaVersionText(n);
  cudaGetLastError();  // leave no sticky error behind for the trainer
  try {
    // LibTorch's CUDA hooks (libtorch_cuda): compile-time CUDNN_VERSION and cudnnGetVersion;
    // neither touches a device. Without libtorch_cuda the default hooks throw.
    const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
    if (hooks.compiledWithCuDNN()) {
      v.cudnn_compiled = CudnnVersionText(hooks.versionCuDNN());
      v.cudnn_loaded = CudnnVersionText(hooks.versionRuntimeCuDNN());
    }
  } catch (const c10::Error&) {
    // No cuDNN in this LibTorch: leave both empty.
  }
  v.nccl_compiled = NcclVersionText(NCCL_VERSION_CODE);
  n = 0;
  if (ncclGetVersion(&n) == ncclSuccess) v.nccl_loaded = NcclVersionText(n);
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) != 0 && info.dli_fname) {
    v.nccl_path = info.dli_fname;
  }
#endif
  return v;
}

nlohmann::ordered_json VersionsJson(const LibraryVersions& v) {
  return {{"torch", v.torch},
          {"cuda_compiled", v.cuda_compiled},
          {"cuda_runtime", v.cuda_runtime},
          {"cuda_driver", v.cuda_driver},
          {"nvidia_driver", v.nvidia_driver},
          {"cudnn_compiled", v.cudnn_compiled},
          {"cudnn_loaded", v.cudnn_loaded},
          {"nccl_compiled", v.nccl_compiled},
          {"nccl_loaded", v.nccl_loaded},
          {"nccl_path", v.nccl_path},
          {"mpi", v.mpi},
          {"mpi_standard", v.mpi_standard}};
}

std::vector<std::pair<std::string, std::string>> BuildInfoLabels(const LibraryVersions& v) {
  const auto or_none = [](const std::string& s) { return s.empty() ? std::string("none") : s; };
  return {{"torch", or_none(v.torch)},
          {"cuda", or_none(v.cuda_runtime)},
          {"cudnn", or_none(v.cudnn_loaded)},
          {"nccl", or_none(v.nccl_loaded)},
          {"mpi", or_none(v.mpi.substr(0, v.mpi.find(',')))},
          {"driver", or_none(v.nvidia_driver.empty() ? v.cuda_driver : v.nvidia_driver)}};
}

}  // namespace ringpilot::trainer::telemetry
