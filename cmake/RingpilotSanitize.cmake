# The sanitizer build (scripts/fuzz.sh configures it in build-fuzz/ with clang):
#   RINGPILOT_SANITIZE  AddressSanitizer + UndefinedBehaviorSanitizer (every finding fatal)
#                       on every project target: the torch-free components and their unit
#                       tests run under both.
#   RINGPILOT_FUZZ      also the libFuzzer targets of tests/fuzz (ctest label `fuzz`); the
#                       project code gets libFuzzer's coverage instrumentation.
# Both need RINGPILOT_TRAINER=OFF: the LibTorch wheel's libraries are not instrumented and
# the trainer's tests are not run here (docs/faults.md says why and what is covered).
option(RINGPILOT_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(RINGPILOT_FUZZ "Build the libFuzzer targets in tests/fuzz (clang; needs RINGPILOT_SANITIZE)"
       OFF)
set(RINGPILOT_FUZZ_SECONDS 60 CACHE STRING "How long ctest runs each fuzz target (label fuzz)")

if(RINGPILOT_FUZZ AND NOT RINGPILOT_SANITIZE)
  message(FATAL_ERROR "ringpilot: RINGPILOT_FUZZ needs RINGPILOT_SANITIZE=ON (scripts/fuzz.sh)")
endif()
if(RINGPILOT_SANITIZE)
  if(RINGPILOT_TRAINER)
    message(FATAL_ERROR "ringpilot: RINGPILOT_SANITIZE needs RINGPILOT_TRAINER=OFF: LibTorch's "
                        "prebuilt libraries are not instrumented (scripts/fuzz.sh, docs/faults.md)")
  endif()
  if(RINGPILOT_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ringpilot: RINGPILOT_FUZZ needs clang (libFuzzer): CC=clang CXX=clang++")
  endif()
  # -fno-sanitize-recover: an undefined behaviour ends the test like a memory error does.
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  if(RINGPILOT_FUZZ)
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
endif()
