// SPDX-License-Identifier: Apache-2.0
// Ceilings of this machine, measured by the program itself (label "measured"): multithreaded streaming memory read
// bandwidth and the OpenBLAS sgemm rate; and the physical floor of a piece of work against them.
#pragma once
#include "common/aligned_floats.hpp"

#include <cstdint>
#include <string>

namespace moebench {

/// Last-level cache of cpu0 in bytes (sysfs, then sysconf); 0 when unknown.
int64_t llc_bytes();

/// A page-touched float buffer that threads read in streaming passes: the bandwidth probe, and the cache flush
/// between iterations of a cold-cache benchmark.
class ReadBuffer {
public:
    /// bytes <= 0: max(4 x LLC, 1 GiB). num_threads <= 0: all hardware threads.
    ReadBuffer(int64_t bytes, int64_t num_threads);
    ~ReadBuffer();
    ReadBuffer(const ReadBuffer&) = delete;
    ReadBuffer& operator=(const ReadBuffer&) = delete;

    int64_t bytes() const { return num_floats_ * 4; }
    int64_t num_threads() const { return num_threads_; }
    const float* data() const { return data_.get(); }
    /// One pass: every thread reads its contiguous slice once, with plain vector loads and, every other pass, with
    /// a software prefetch ahead as well (which of the two reads faster depends on the machine and its load).
    /// Returns the pass's wall time in seconds.
    double read_pass();

private:
    AlignedFloats data_;  // aligned: a straddling load would measure the split, not the memory
    int64_t num_floats_ = 0;
    int64_t num_threads_ = 1;
    int64_t passes_ = 0;
    volatile float sink_ = 0;  // keeps the reads from being optimised away
};

/// A measured rate: value (bytes/s or FLOP/s), best of `repeats` passes, with how it was measured.
struct Ceiling {
    double value = 0;
    std::string unit;  // "bytes/s" or "flop/s"
    std::string source = "measured";
    std::string method;  // one line for reports
};

/// Memory read bandwidth: best of `repeats` read passes over `buf` (bytes / seconds).
Ceiling measure_read_bandwidth(ReadBuffer& buf, int repeats = 5);
/// How a read ceiling over `passes` passes of buf was measured, in words (Ceiling::method).
std::string read_bandwidth_method(const ReadBuffer& buf, int64_t passes);
/// OpenBLAS sgemm rate: C[n, n] = A[n, n] . B[n, n]^T on `num_threads` OpenBLAS threads (<= 0: all), best of
/// `repeats` (2 n^3 / seconds). Sets OpenBLAS's thread count to num_threads.
Ceiling measure_sgemm_rate(int64_t n = 2048, int64_t num_threads = 0, int repeats = 5);

/// The physical floor of a piece of work: the larger of bytes / bandwidth and flops / rate (microseconds).
struct Floor {
    double memory_us = 0;
    double compute_us = 0;
    double floor_us = 0;
    std::string bound;  // "memory" or "compute"
};
Floor physical_floor(double bytes, double flops, double read_bytes_per_s, double flops_per_s);

/// Empty when measured_us >= the floor. Otherwise one sentence for the report: work cannot beat its physical floor,
/// so the bounding ceiling was under-measured (or a datasheet figure is off); when that is the sgemm rate and
/// OPENBLAS_CORETYPE is set, it names the kernels OpenBLAS was held to.
std::string below_floor_warning(const Floor& f, double measured_us);

}  // namespace moebench
