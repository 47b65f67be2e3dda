// SPDX-License-Identifier: Apache-2.0
// `mpirun -np N moebench bench a2a`: one expert-parallel run, then bare all-to-all-v calls of the byte matrices it
// counted, in the same job (a2a_baseline.hpp); the document "moebench.bench_a2a/1" holds both and the ratio
// (moebench's algbw over the bare calls'). Its views are the format table's (report/formats.hpp).
#pragma once
#include "common/json_util.hpp"
#include "config/run_config.hpp"

#include <cstdint>

namespace moebench {

struct BenchA2aRequest {
    RunConfig run;                // the expert-parallel run (its layout's ep = the processes; validated here)
    int64_t baseline_iters = 50;  // repetitions of the bare calls
};

/// The run bench a2a makes unless told otherwise: the cpu backend, one expert-parallel rank per process, one layer.
/// ConfigError (naming the command) in one process: there are no all-to-alls between processes to time.
RunConfig bench_a2a_run_config();

/// Every rank calls it. ConfigError (naming the field) in one process, or for a bad request. Returns the
/// moebench.bench_a2a/1 document at the rank that writes outputs (rank 0), null at the others.
json bench_a2a(const BenchA2aRequest& r);

}  // namespace moebench
