# SPDX-License-Identifier: Apache-2.0
# Host dependencies, all from Debian packages; a missing one names the package to install.
find_package(Threads REQUIRED)

macro(moebench_require pkg debian)
  find_package(${pkg} ${ARGN} QUIET)
  if(NOT ${pkg}_FOUND)
    message(FATAL_ERROR "${pkg} not found: install the Debian package '${debian}' (or run scripts/setup.sh)")
  endif()
endmacro()

moebench_require(CLI11 libcli11-dev CONFIG)
moebench_require(nlohmann_json nlohmann-json3-dev CONFIG)
moebench_require(fmt libfmt-dev CONFIG)

# OpenBLAS ships a config that only sets variables; wrap it in a target.
find_package(OpenBLAS CONFIG QUIET)
if(NOT OpenBLAS_FOUND)
  message(FATAL_ERROR "OpenBLAS not found: install the Debian package 'libopenblas-dev' (or run scripts/setup.sh)")
endif()
add_library(moebench_openblas INTERFACE)
target_include_directories(moebench_openblas INTERFACE ${OpenBLAS_INCLUDE_DIRS})
target_link_libraries(moebench_openblas INTERFACE ${OpenBLAS_LIBRARIES})

if(MOEBENCH_TESTS)
  moebench_require(Catch2 catch2 CONFIG)
endif()
