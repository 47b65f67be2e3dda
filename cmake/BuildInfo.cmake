# SPDX-License-Identifier: Apache-2.0
# Script mode (cmake -P), run at every build: writes build_info.hpp with the current git revision ("-dirty" when
# what is compiled in, src/ kernels/ cmake/ CMakeLists.txt, has uncommitted changes; results/ and docs do not count). configure_file rewrites the header only when its text changes, so
# an unchanged revision rebuilds nothing. Inputs: SRC_DIR, IN, OUT, PROJECT_VERSION.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC_DIR}
                OUTPUT_VARIABLE MOEBENCH_GIT_REV OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT MOEBENCH_GIT_REV)
  set(MOEBENCH_GIT_REV "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- src kernels cmake CMakeLists.txt WORKING_DIRECTORY ${SRC_DIR}
                  RESULT_VARIABLE moebench_dirty ERROR_QUIET)
  if(moebench_dirty)
    string(APPEND MOEBENCH_GIT_REV "-dirty")
  endif()
endif()
configure_file(${IN} ${OUT} @ONLY)
