# Third-party dependencies. Each becomes an imported target so that project code
# links targets, never raw paths, and their headers count as SYSTEM headers.

find_package(MPI REQUIRED COMPONENTS C)
# The C API only: OpenMPI's mpi.h otherwise pulls in the deprecated C++ bindings.
add_compile_definitions(OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
find_package(yaml-cpp REQUIRED)
# yaml-cpp 0.7 (Debian 12) exports `yaml-cpp`, 0.8 (Ubuntu 24.04) `yaml-cpp::yaml-cpp`.
add_library(ringpilot_yaml INTERFACE)
if(TARGET yaml-cpp::yaml-cpp)
  target_link_libraries(ringpilot_yaml INTERFACE yaml-cpp::yaml-cpp)
else()
  target_link_libraries(ringpilot_yaml INTERFACE yaml-cpp)
endif()
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
# `ringpilot data tokenize` (cli/): SentencePiece's C++ API (Debian libsentencepiece-dev).
# Found by path, not pkg-config: its .pc names prefix /usr, which is wrong for the copy
# scripts/carry_gpu_deps.sh unpacks under .carry/deps (on CMAKE_PREFIX_PATH).
find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h REQUIRED)
find_library(SENTENCEPIECE_LIBRARY sentencepiece REQUIRED)
add_library(ringpilot_sentencepiece INTERFACE)
add_library(ringpilot::sentencepiece ALIAS ringpilot_sentencepiece)
target_include_directories(ringpilot_sentencepiece SYSTEM INTERFACE ${SENTENCEPIECE_INCLUDE_DIR})
target_link_libraries(ringpilot_sentencepiece INTERFACE ${SENTENCEPIECE_LIBRARY})

# prometheus-cpp (Debian prometheus-cpp-dev 1.0.1): metric families, the text exposition and
# the HTTP exposer, which runs civetweb. Its CMake package also finds civetweb
# (civetweb::civetweb, civetweb::civetweb-cpp: the `civetweb` package must be installed, its
# targets name /usr/bin/civetweb), CURL (for prometheus-cpp::push, unused) and ZLIB. On the
# GPU machine scripts/carry_gpu_deps.sh unpacks all of them (tests/gpu/env.sh).
find_package(prometheus-cpp CONFIG REQUIRED)

# OpenSSL's libcrypto: SHA-256 of checkpoints (trainer/sha256.cpp, bench/checkpoint_hash.cpp).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

# Image datasets (data/): libjpeg-turbo's TurboJPEG API, libpng, and stb_image_resize
# (header-only, compiled into data/image_pack.cpp) for `ringpilot data pack --max-side`.
# Found by path rather than pkg-config, so that the copies scripts/carry_gpu_deps.sh unpacks
# (CMAKE_PREFIX_PATH) work where the image has none.
find_path(TURBOJPEG_INCLUDE_DIR turbojpeg.h REQUIRED)
find_library(TURBOJPEG_LIBRARY NAMES turbojpeg REQUIRED)
add_library(ringpilot_turbojpeg INTERFACE)
target_include_directories(ringpilot_turbojpeg SYSTEM INTERFACE ${TURBOJPEG_INCLUDE_DIR})
target_link_libraries(ringpilot_turbojpeg INTERFACE ${TURBOJPEG_LIBRARY})
# libjpeg-turbo's libjpeg API (libjpeg62-turbo-dev): the crop-only decode of the loader
# (data/jpeg_crop_decode.cpp: jpeg_crop_scanline, jpeg_skip_scanlines), which TurboJPEG 2.1
# does not expose.
find_path(LIBJPEG_INCLUDE_DIR jpeglib.h REQUIRED)
find_library(LIBJPEG_LIBRARY NAMES jpeg REQUIRED)
add_library(ringpilot_libjpeg INTERFACE)
target_include_directories(ringpilot_libjpeg SYSTEM INTERFACE ${LIBJPEG_INCLUDE_DIR})
target_link_libraries(ringpilot_libjpeg INTERFACE ${LIBJPEG_LIBRARY})
find_package(PNG REQUIRED)
find_path(STB_INCLUDE_DIR stb_image_resize.h PATH_SUFFIXES stb REQUIRED)
add_library(ringpilot_stb INTERFACE)
target_include_directories(ringpilot_stb SYSTEM INTERFACE ${STB_INCLUDE_DIR})

# The setup's venv (scripts/setup.sh): LibTorch's torch wheel, and in every build, the
# trainer-less sanitizer build too, the Python that `ringpilot data tokenize` runs its
# `tokenizers` helper with (cli/CMakeLists.txt).
if(NOT RINGPILOT_PYTHON AND EXISTS ${CMAKE_SOURCE_DIR}/.venv/bin/python)
  set(RINGPILOT_PYTHON ${CMAKE_SOURCE_DIR}/.venv/bin/python)
endif()

if(NOT RINGPILOT_TRAINER)
  return()
endif()

# LibTorch comes from the torch wheel.
if(NOT RINGPILOT_PYTHON)
  find_program(RINGPILOT_PYTHON NAMES python3 python REQUIRED)
endif()
execute_process(
  COMMAND ${RINGPILOT_PYTHON} -c "import torch,os;print(torch.utils.cmake_prefix_path);print(os.path.dirname(torch.__file__))"
  OUTPUT_VARIABLE _torch_out RESULT_VARIABLE _torch_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "ringpilot: ${RINGPILOT_PYTHON} cannot import torch; run scripts/setup.sh")
endif()
string(REPLACE "\n" ";" _torch_out "${_torch_out}")
list(GET _torch_out 0 _torch_prefix)
list(GET _torch_out 1 RINGPILOT_TORCH_DIR)
list(APPEND CMAKE_PREFIX_PATH ${_torch_prefix})
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "9.0")
endif()
find_package(Torch REQUIRED)

# GPU code compiles whenever LibTorch is a CUDA build and the CUDA toolkit is here,
# whether or not a GPU is present (CI compiles it; the GPU machine runs it).
set(RINGPILOT_WITH_CUDA OFF)
if(TARGET c10_cuda)
  find_package(CUDAToolkit QUIET)
  # NCCL must be the one LibTorch loads: the wheel's nvidia/nccl beside torch/.
  get_filename_component(_site ${RINGPILOT_TORCH_DIR} DIRECTORY)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_site}/nvidia/nccl/include ${CUDAToolkit_INCLUDE_DIRS}
            NO_DEFAULT_PATH)
  find_library(NCCL_LIBRARY NAMES libnccl.so.2 nccl HINTS ${_site}/nvidia/nccl/lib
               ${CUDAToolkit_LIBRARY_DIR} NO_DEFAULT_PATH)
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(RINGPILOT_WITH_CUDA ON)
    add_library(ringpilot_nccl UNKNOWN IMPORTED)
    set_target_properties(ringpilot_nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    message(STATUS "ringpilot: CUDA ${CUDAToolkit_VERSION}, NCCL ${NCCL_LIBRARY}")
  else()
    message(WARNING "ringpilot: CUDA LibTorch but no CUDA toolkit/NCCL headers; GPU code skipped")
  endif()
endif()

# nvJPEG (the GPU image pipeline, data/cuda/): the CUDA toolkit's where it has it (the GPU
# machines' does), else the nvidia-nvjpeg wheel's (scripts/setup.sh installs it beside torch
# on a toolkit without nvJPEG, so CI compiles the pipeline). Without it GPU ranks decode
# images on the host.
set(RINGPILOT_WITH_NVJPEG OFF)
if(RINGPILOT_WITH_CUDA)
  find_path(NVJPEG_INCLUDE_DIR nvjpeg.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_site}/nvidia/cu13/include
            NO_DEFAULT_PATH)
  find_library(NVJPEG_LIBRARY NAMES nvjpeg libnvjpeg.so.13
               HINTS ${CUDAToolkit_LIBRARY_DIR} ${_site}/nvidia/cu13/lib NO_DEFAULT_PATH)
  if(NVJPEG_INCLUDE_DIR AND NVJPEG_LIBRARY)
    set(RINGPILOT_WITH_NVJPEG ON)
    add_library(ringpilot_nvjpeg UNKNOWN IMPORTED)
    set_target_properties(ringpilot_nvjpeg PROPERTIES IMPORTED_LOCATION ${NVJPEG_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${NVJPEG_INCLUDE_DIR})
    message(STATUS "ringpilot: nvJPEG ${NVJPEG_LIBRARY}")
  else()
    message(STATUS "ringpilot: no nvJPEG; GPU ranks decode images on the host")
  endif()
endif()

# The cuDNN frontend's header-only graph API (PyPI nvidia-cudnn-frontend: its headers land in
# site-packages/include) over the cuDNN the torch wheel ships, and NVRTC, which the frontend
# links. Only the convolution + batch-norm fusion probe (bench/conv_bn_fusion_probe.cpp) uses
# it so far; without it that probe is not built.
set(RINGPILOT_WITH_CUDNN_FRONTEND OFF)
if(RINGPILOT_WITH_CUDA)
  find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h HINTS ${_site}/include NO_DEFAULT_PATH)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${_site}/nvidia/cudnn/include NO_DEFAULT_PATH)
  find_library(CUDNN_LIBRARY NAMES libcudnn.so.9 HINTS ${_site}/nvidia/cudnn/lib NO_DEFAULT_PATH)
  find_library(NVRTC_LIBRARY NAMES nvrtc libnvrtc.so.13
               HINTS ${CUDAToolkit_LIBRARY_DIR} ${_site}/nvidia/cu13/lib NO_DEFAULT_PATH)
  if(CUDNN_FRONTEND_INCLUDE_DIR AND CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND NVRTC_LIBRARY)
    set(RINGPILOT_WITH_CUDNN_FRONTEND ON)
    add_library(ringpilot_cudnn_frontend INTERFACE)
    target_include_directories(ringpilot_cudnn_frontend SYSTEM INTERFACE
                               ${CUDNN_FRONTEND_INCLUDE_DIR} ${CUDNN_INCLUDE_DIR})
    target_link_libraries(ringpilot_cudnn_frontend INTERFACE ${CUDNN_LIBRARY} ${NVRTC_LIBRARY}
                          CUDA::cudart)
    message(STATUS "ringpilot: cuDNN frontend ${CUDNN_FRONTEND_INCLUDE_DIR}, ${CUDNN_LIBRARY}")
  else()
    message(STATUS "ringpilot: no cuDNN frontend headers (pip install nvidia-cudnn-frontend); "
                   "bench/conv_bn_fusion_probe.cpp skipped")
  endif()
endif()

# One precompiled LibTorch header shared by every LibTorch target (REUSE_FROM):
# torch/torch.h costs ~15 s per translation unit on two cores otherwise.
add_library(ringpilot_torch_pch STATIC ${CMAKE_SOURCE_DIR}/cmake/torch_pch.cpp)
target_link_libraries(ringpilot_torch_pch PUBLIC ${TORCH_LIBRARIES})
target_precompile_headers(ringpilot_torch_pch PRIVATE <torch/torch.h>)
if(RINGPILOT_WITH_CUDA)
  target_compile_definitions(ringpilot_torch_pch PUBLIC RINGPILOT_WITH_CUDA=1)
endif()

# Links LibTorch into TARGET and reuses the shared precompiled header. TARGET must be
# a library: GCC refuses a -fPIC header in -fPIE executables (see
# ringpilot_torch_executable).
function(ringpilot_use_torch target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  if(RINGPILOT_WITH_CUDA)
    target_compile_definitions(${target} PUBLIC RINGPILOT_WITH_CUDA=1)
  endif()
  target_precompile_headers(${target} REUSE_FROM ringpilot_torch_pch)
endfunction()

# An executable whose sources use LibTorch: they compile as a PIC object library that
# reuses the shared precompiled header, then link into NAME.
function(ringpilot_torch_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${name}_objects OBJECT ${ARG_SOURCES})
  target_link_libraries(${name}_objects PUBLIC ${ARG_LIBS} PRIVATE ringpilot::warnings)
  target_include_directories(${name}_objects PRIVATE ${CMAKE_SOURCE_DIR})
  ringpilot_use_torch(${name}_objects)
  add_executable(${name} $<TARGET_OBJECTS:${name}_objects>)
  target_link_libraries(${name} PRIVATE ${name}_objects)
endfunction()

# CUDA kernels of a component (.cu files): a small static library of its own, compiled by
# nvcc without LibTorch headers (no precompiled header, fast), for Ampere and Hopper with
# PTX for later GPUs. Its header exposes plain launch functions on raw pointers.
set(RINGPILOT_CUDA_ARCHITECTURES "80-real;90-real;90-virtual" CACHE STRING
    "GPU architectures of ringpilot's own kernels")
function(ringpilot_cuda_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES CUDA_ARCHITECTURES "${RINGPILOT_CUDA_ARCHITECTURES}"
                                           CUDA_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  target_link_libraries(${name} PUBLIC CUDA::cudart PRIVATE ringpilot::warnings)
endfunction()
