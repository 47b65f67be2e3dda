// SPDX-License-Identifier: Apache-2.0
// MOEBENCH_HD marks functions compiled for both host (g++) and device (nvcc).
#pragma once
#if defined(__CUDACC__)
#define MOEBENCH_HD __host__ __device__
#else
#define MOEBENCH_HD
#endif
