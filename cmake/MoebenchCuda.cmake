# SPDX-License-Identifier: Apache-2.0
# Optional CUDA backend. AUTO builds it when nvcc is found; the binary never links libcuda (driver stub).
# NCCL is optional inside it (MoebenchNccl.cmake: MOEBENCH_HAS_NCCL).
set(MOEBENCH_HAS_CUDA OFF)
set(MOEBENCH_HAS_NCCL OFF)
if(NOT MOEBENCH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)               # CMake 3.25 cannot ask nvcc for CUDA 20
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)    # avoid cudart_static + libcudart.so on one link line
    find_package(CUDAToolkit REQUIRED)
    include(${CMAKE_CURRENT_LIST_DIR}/MoebenchNccl.cmake)
    set(MOEBENCH_HAS_CUDA ON)
    message(STATUS "moebench: CUDA backend ON (archs ${CMAKE_CUDA_ARCHITECTURES}, toolkit ${CUDAToolkit_VERSION})")
  elseif(MOEBENCH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MOEBENCH_CUDA=ON but no CUDA compiler was found: install the CUDA toolkit or use -DMOEBENCH_CUDA=OFF")
  else()
    message(STATUS "moebench: no CUDA compiler found, CUDA backend OFF")
  endif()
endif()
