# SPDX-License-Identifier: Apache-2.0
# NCCL for the CUDA backend, optional: sets MOEBENCH_HAS_NCCL and the target moebench_nccl (empty without NCCL).
# Looked for, in order: NCCL_HOME (cache or environment), next to the CUDA toolkit, the system, then Python's
# nvidia-nccl-cu13 wheel (site-packages/nvidia/nccl/{include,lib}: the only NCCL on the GPU machine). Not found:
# the backend builds without it (no expert-parallel all-to-all on GPUs) and says so.
set(NCCL_HOME "$ENV{NCCL_HOME}" CACHE PATH "NCCL install folder (include/nccl.h, lib/libnccl.so*); empty: search")

set(_moebench_nccl_hints "")
if(NCCL_HOME)
  list(APPEND _moebench_nccl_hints "${NCCL_HOME}")
endif()
list(APPEND _moebench_nccl_hints ${CUDAToolkit_INCLUDE_DIRS} "${CUDAToolkit_LIBRARY_DIR}" "${CUDAToolkit_TARGET_DIR}")

# Python's wheel, only asked when the places above have no NCCL (importing the package costs ~0.1 s).
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_moebench_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_moebench_nccl_hints} PATH_SUFFIXES lib lib64)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  find_program(MOEBENCH_PYTHON3_FOR_NCCL NAMES python3)
  if(MOEBENCH_PYTHON3_FOR_NCCL)
    execute_process(COMMAND "${MOEBENCH_PYTHON3_FOR_NCCL}" -c
                            "import nvidia.nccl as m; print(list(m.__path__)[0])"
                    OUTPUT_VARIABLE _moebench_nccl_py OUTPUT_STRIP_TRAILING_WHITESPACE
                    ERROR_QUIET RESULT_VARIABLE _moebench_nccl_py_rc TIMEOUT 30)
    if(_moebench_nccl_py_rc EQUAL 0 AND IS_DIRECTORY "${_moebench_nccl_py}")
      unset(NCCL_INCLUDE_DIR CACHE)
      unset(NCCL_LIBRARY CACHE)
      find_path(NCCL_INCLUDE_DIR nccl.h PATHS "${_moebench_nccl_py}/include" NO_DEFAULT_PATH)
      find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 PATHS "${_moebench_nccl_py}/lib" NO_DEFAULT_PATH)
    endif()
  endif()
endif()

if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _moebench_nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  string(REGEX REPLACE "[^;]*NCCL_[A-Z]+ +([0-9]+)[^;]*" "\\1" _moebench_nccl_ver "${_moebench_nccl_ver}")
  list(JOIN _moebench_nccl_ver "." _moebench_nccl_ver)
  add_library(moebench_nccl UNKNOWN IMPORTED)
  set_target_properties(moebench_nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  set(MOEBENCH_HAS_NCCL ON)
  message(STATUS "moebench: NCCL ${_moebench_nccl_ver}: ${NCCL_LIBRARY} (headers ${NCCL_INCLUDE_DIR})")
else()
  add_library(moebench_nccl INTERFACE)
  set(MOEBENCH_HAS_NCCL OFF)
  message(STATUS "moebench: NCCL not found (NCCL_HOME, CUDA toolkit, system, Python nvidia.nccl): CUDA backend "
                 "built without it (MOEBENCH_HAS_NCCL=0, no GPU all-to-all); set NCCL_HOME to use one")
endif()
