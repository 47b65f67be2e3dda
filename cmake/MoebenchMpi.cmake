# SPDX-License-Identifier: Apache-2.0
# Optional MPI (OpenMPI from Debian: libopenmpi-dev, openmpi-bin) for expert parallelism across processes.
# AUTO builds it where MPI is found; the binary still runs as one process without a launcher either way.
set(MOEBENCH_MPI AUTO CACHE STRING "Build multi-process expert parallelism over MPI: AUTO, ON or OFF")
set_property(CACHE MOEBENCH_MPI PROPERTY STRINGS AUTO ON OFF)
set(MOEBENCH_HAS_MPI OFF)
if(NOT MOEBENCH_MPI STREQUAL "OFF")
  # The C API through the C++ wrapper's flags (the project enables no C language); no MPI C++ bindings.
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(MOEBENCH_HAS_MPI ON)
    find_program(MOEBENCH_MPIEXEC NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
    message(STATUS "moebench: MPI ON (MPI ${MPI_CXX_VERSION})")
  elseif(MOEBENCH_MPI STREQUAL "ON")
    message(FATAL_ERROR "MOEBENCH_MPI=ON but no MPI was found: install libopenmpi-dev openmpi-bin or use -DMOEBENCH_MPI=OFF")
  else()
    message(STATUS "moebench: no MPI found, multi-process expert parallelism OFF (install libopenmpi-dev)")
  endif()
endif()
