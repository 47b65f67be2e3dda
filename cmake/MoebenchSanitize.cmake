# SPDX-License-Identifier: Apache-2.0
# -DMOEBENCH_SANITIZE=address,undefined: ASan and/or UBSan. moebench's own code (the layer libraries and the binary, which
# the CLI tests run) is instrumented; the test executables link the runtimes (every allocation gets redzones, the leak
# check runs) but their own sources are compiled plainly: they are the checkers, and instrumenting Catch2 and the test
# bodies doubled the tree's build time for nothing checked in moebench. UBSan halts on the first report
# (-fno-sanitize-recover) so a test fails instead of printing a warning and passing. The CUDA backend is left out (MOEBENCH_HAS_CUDA OFF): nvcc
# host code under ASan and the CUDA runtime's own allocations give reports that are not ours.
set(MOEBENCH_SANITIZE "" CACHE STRING "Sanitizers for every target: empty, or a comma list of address, undefined")
set(MOEBENCH_SANITIZE_KNOWN address undefined)
# -DMOEBENCH_FUZZ=ON (clang): the libFuzzer targets of fuzz/ in this tree, linked against its layer libraries, which
# are then also instrumented for coverage (-fsanitize=fuzzer-no-link; the binary and the tests run as before, the
# sanitizer runtime answers the coverage hooks). One tree, one list of sources: the fuzz build cannot drift from the
# main one (it compiled its own copy of src/, and broke when CUDA-only files joined src/comm/). Without
# MOEBENCH_SANITIZE it sets address,undefined (a fuzzer without sanitizers finds only crashes).
option(MOEBENCH_FUZZ "Build the libFuzzer targets (fuzz/, clang): instruments the layer libraries for coverage" OFF)
if(MOEBENCH_FUZZ AND NOT MOEBENCH_SANITIZE)
  set(MOEBENCH_SANITIZE address,undefined)  # a normal variable: shadows the empty cache entry
endif()

set(MOEBENCH_SANITIZERS "")
# Linked PRIVATE by the targets whose code is instrumented (empty without sanitizers).
add_library(moebench_sanitize_instrument INTERFACE)
if(MOEBENCH_SANITIZE)
  string(REPLACE "," ";" _moebench_san_list "${MOEBENCH_SANITIZE}")
  foreach(_san IN LISTS _moebench_san_list)
    string(STRIP "${_san}" _san)
    if(_san STREQUAL "")
      continue()
    endif()
    if(NOT _san IN_LIST MOEBENCH_SANITIZE_KNOWN)
      message(FATAL_ERROR "MOEBENCH_SANITIZE: unknown sanitizer '${_san}' in '${MOEBENCH_SANITIZE}'; "
                          "use a comma list of: address, undefined (e.g. -DMOEBENCH_SANITIZE=address,undefined)")
    endif()
    list(APPEND MOEBENCH_SANITIZERS ${_san})
  endforeach()
  list(REMOVE_DUPLICATES MOEBENCH_SANITIZERS)
endif()

if(MOEBENCH_SANITIZERS)
  if(MOEBENCH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MOEBENCH_SANITIZE=${MOEBENCH_SANITIZE} builds without the CUDA backend: "
                        "use -DMOEBENCH_CUDA=OFF (or AUTO) with it")
  endif()
  set(MOEBENCH_CUDA OFF)  # a normal variable: shadows the cache entry for this configure only
  list(JOIN MOEBENCH_SANITIZERS "," _moebench_san_flag)
  set(_moebench_san_opts -fsanitize=${_moebench_san_flag} -fno-omit-frame-pointer)
  if("undefined" IN_LIST MOEBENCH_SANITIZERS)
    list(APPEND _moebench_san_opts -fno-sanitize-recover=undefined)
  endif()
  # Line tables for the reports' file:line when the build type has no debug info of its own.
  if(NOT CMAKE_BUILD_TYPE MATCHES "^(Debug|RelWithDebInfo)$")
    list(APPEND _moebench_san_opts -g1)
  endif()
  target_compile_options(moebench_sanitize_instrument INTERFACE ${_moebench_san_opts})
  # Every file, instrumented or not, may ask (common/sanitizers.hpp): the uninstrumented tests run the ASan binary.
  if("address" IN_LIST MOEBENCH_SANITIZERS)
    add_compile_definitions(MOEBENCH_SANITIZE_ADDRESS=1)
  endif()
  add_link_options(-fsanitize=${_moebench_san_flag})
  message(STATUS "moebench: sanitizers ${_moebench_san_flag}: the layer libraries and moebench instrumented, "
                 "every executable linked with the runtimes (CUDA backend OFF)")
endif()

if(MOEBENCH_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MOEBENCH_FUZZ=ON needs clang for libFuzzer (the compiler is ${CMAKE_CXX_COMPILER_ID}): "
                        "configure a fresh build folder with -DCMAKE_CXX_COMPILER=clang++ (Debian packages clang-14 "
                        "and libclang-rt-14-dev)")
  endif()
  # libFuzzer ships in compiler-rt, a Debian package apart from clang itself.
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,${_moebench_san_flag}")
  check_cxx_source_compiles("#include <cstddef>
#include <cstdint>
extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }" MOEBENCH_HAS_LIBFUZZER)
  unset(CMAKE_REQUIRED_FLAGS)
  if(NOT MOEBENCH_HAS_LIBFUZZER)
    message(FATAL_ERROR "clang cannot link -fsanitize=fuzzer,${_moebench_san_flag}: install the Debian package "
                        "libclang-rt-14-dev (libFuzzer, ASan and UBSan runtimes for clang 14)")
  endif()
  target_compile_options(moebench_sanitize_instrument INTERFACE -fsanitize=fuzzer-no-link)
  message(STATUS "moebench: fuzz targets (fuzz/): the layer libraries instrumented for coverage too")
endif()
