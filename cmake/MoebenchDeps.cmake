# SPDX-License-Identifier: Apache-2.0
# Host dependencies, all from Debian packages; a missing one names the package to install.
#
# Two sources:
# - the system (/usr, apt-get install): fmt and OpenBLAS are linked as shared libraries;
# - a bundle (-DMOEBENCH_DEPS_PREFIX=<dir>/usr, the same Debian packages unpacked with dpkg -x by
#   scripts/device-bundle.sh --unpack <dir>), for a machine without a package registry. Only the bundle is searched,
#   and the build needs no shared library from it at run time: fmt's implementation is compiled in
#   (cmake/fmt_once.cpp) and OpenBLAS is linked statically (its BLAS part needs no libgfortran), so the binary runs
#   where only libc and libstdc++ are.
find_package(Threads REQUIRED)

set(MOEBENCH_DEPS_PREFIX "" CACHE PATH
    "usr/ folder of an unpacked dependency bundle (scripts/device-bundle.sh --unpack); empty: the system's packages")

set(_moebench_deps_search "")
if(MOEBENCH_DEPS_PREFIX)
  get_filename_component(MOEBENCH_DEPS_PREFIX "${MOEBENCH_DEPS_PREFIX}" ABSOLUTE)
  if(NOT IS_DIRECTORY "${MOEBENCH_DEPS_PREFIX}/include")
    message(FATAL_ERROR "MOEBENCH_DEPS_PREFIX=${MOEBENCH_DEPS_PREFIX} has no include/ folder: unpack the bundle with "
                        "'scripts/device-bundle.sh --unpack DIR' and pass DIR/usr")
  endif()
  set(_moebench_arch "${CMAKE_LIBRARY_ARCHITECTURE}")
  if(NOT _moebench_arch)
    set(_moebench_arch x86_64-linux-gnu)  # the bundle's Debian multiarch folder; non-Debian compilers leave it unset
  endif()
  # The bundle only (no silent mix with a system copy); the extra prefixes reach Debian's multiarch config folders
  # even when CMAKE_LIBRARY_ARCHITECTURE is unset.
  set(_moebench_deps_search NO_DEFAULT_PATH PATHS "${MOEBENCH_DEPS_PREFIX}"
      "${MOEBENCH_DEPS_PREFIX}/lib/${_moebench_arch}/cmake" "${MOEBENCH_DEPS_PREFIX}/lib/${_moebench_arch}/openblas-pthread/cmake")
  message(STATUS "moebench: dependencies from the bundle ${MOEBENCH_DEPS_PREFIX} (fmt compiled in, OpenBLAS static)")
endif()

macro(moebench_require pkg debian)
  find_package(${pkg} ${ARGN} QUIET ${_moebench_deps_search})
  if(NOT ${pkg}_FOUND)
    if(MOEBENCH_DEPS_PREFIX)
      message(FATAL_ERROR "${pkg} not found in the bundle ${MOEBENCH_DEPS_PREFIX} (Debian package '${debian}'): "
                          "rerun scripts/device-bundle.sh on a machine with apt, then --unpack")
    endif()
    message(FATAL_ERROR "${pkg} not found: install the Debian package '${debian}' (or run scripts/setup.sh)")
  endif()
endmacro()

moebench_require(CLI11 libcli11-dev CONFIG)
moebench_require(nlohmann_json nlohmann-json3-dev CONFIG)
moebench_require(fmt libfmt-dev CONFIG)
add_library(moebench_fmt INTERFACE)
if(MOEBENCH_DEPS_PREFIX)
  # fmt has no library to link here (the bundle carries none): its implementation is compiled once, into a static
  # library with fmt's headers (cmake/fmt_once.cpp), not into every file as FMT_HEADER_ONLY would (a third of the
  # sanitizer tree's compile time went there).
  get_target_property(_moebench_fmt_include fmt::fmt-header-only INTERFACE_INCLUDE_DIRECTORIES)
  add_library(moebench_fmt_once STATIC ${CMAKE_CURRENT_LIST_DIR}/fmt_once.cpp)
  target_include_directories(moebench_fmt_once SYSTEM PUBLIC ${_moebench_fmt_include})
  target_link_libraries(moebench_fmt INTERFACE moebench_fmt_once)
else()
  target_link_libraries(moebench_fmt INTERFACE fmt::fmt)
endif()

# OpenBLAS ships a config that only sets variables, with absolute /usr paths; wrap it in a target.
moebench_require(OpenBLAS libopenblas-dev CONFIG)
# Found under a dpkg -x prefix (<root>/usr/lib/...): its /usr paths name the system's copy (or nothing), so rebase
# them onto <root>.
get_filename_component(_moebench_openblas_dir "${OpenBLAS_DIR}" REALPATH)
if(_moebench_openblas_dir MATCHES "^(.+)/usr/lib/")
  set(_moebench_root "${CMAKE_MATCH_1}")
  list(TRANSFORM OpenBLAS_INCLUDE_DIRS REPLACE "^/usr/" "${_moebench_root}/usr/")
  list(TRANSFORM OpenBLAS_LIBRARIES REPLACE "^/usr/" "${_moebench_root}/usr/")
endif()
if(MOEBENCH_DEPS_PREFIX)
  list(TRANSFORM OpenBLAS_LIBRARIES REPLACE "\\.so$" ".a")
endif()
foreach(_moebench_path IN LISTS OpenBLAS_INCLUDE_DIRS OpenBLAS_LIBRARIES)
  if(NOT EXISTS "${_moebench_path}")
    message(FATAL_ERROR "OpenBLAS (config ${OpenBLAS_DIR}) names ${_moebench_path}, which does not exist: "
                        "reinstall 'libopenblas-dev' (or rerun scripts/device-bundle.sh)")
  endif()
endforeach()
add_library(moebench_openblas INTERFACE)
target_include_directories(moebench_openblas INTERFACE ${OpenBLAS_INCLUDE_DIRS})
target_link_libraries(moebench_openblas INTERFACE ${OpenBLAS_LIBRARIES})
if(MOEBENCH_DEPS_PREFIX)
  target_link_libraries(moebench_openblas INTERFACE Threads::Threads m)  # what the static archive needs
endif()

if(MOEBENCH_TESTS)
  moebench_require(Catch2 catch2 CONFIG)
endif()
