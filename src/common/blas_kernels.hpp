// SPDX-License-Identifier: Apache-2.0
// Makes sure OpenBLAS runs the kernels this CPU supports (some builds fall back to SSE3 on CPUs they do not know).
#pragma once

namespace moebench {

/// When OpenBLAS chose its Prescott (SSE3) kernels on a CPU with AVX2/AVX-512 and OPENBLAS_CORETYPE is unset,
/// re-executes this process with OPENBLAS_CORETYPE set to the best supported family (the core type is read only
/// when the library loads). Prints one line naming `who`. Returns normally in every other case.
void ensure_blas_kernels(const char* who);

/// Set in the re-executed process's environment to the core type OpenBLAS had picked before (report: environment).
inline constexpr const char* kReexecutedForCoretype = "MOEBENCH_REEXECUTED_FROM_CORETYPE";

}  // namespace moebench
