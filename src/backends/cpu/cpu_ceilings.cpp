// SPDX-License-Identifier: Apache-2.0
// --measure-ceilings on the cpu backend: this host's streaming read bandwidth and OpenBLAS sgemm rate (fp32).
#include "backends/cpu/cpu_backend_impl.hpp"

#include "common/host_memory.hpp"

#include <fmt/format.h>
#include "metrics/ceilings.hpp"

#include <algorithm>

namespace moebench::cpu {

RooflineCeilings CpuBackend::measure_ceilings(const RunOptions& opt) const {
    RooflineCeilings c;
    c.source = "measured on this machine";
    // Other work on the machine only ever lowers a measured ceiling, and a low ceiling puts a run "below its
    // floor": best of 12 read passes (~0.5 s for 1 GiB) and 5 sgemms. With 5 passes a default run on the
    // shared 2-core Xeon read 25.9 GB/s where bench moe (best of 28) read 30-31.
    ReadBuffer buf(0, opt.num_threads);
    Ceiling bw = measure_read_bandwidth(buf, 12);
    Ceiling gemm = measure_sgemm_rate(2048, opt.num_threads, 5);
    c.mem_bw_bytes_per_s = bw.value;
    c.peak_flops_per_s = gemm.value;
    c.detail = {{"mem_bw", {{"value", bw.value}, {"unit", bw.unit}, {"method", bw.method}, {"before", bw.value}}},
                {"peak_flops", {{"value", gemm.value}, {"unit", gemm.unit}, {"method", gemm.method}}}};
    c.note = "cpu: streaming read bandwidth and OpenBLAS sgemm rate (fp32), measured before the run";
    return c;
}

// The cpu read bandwidth once more after the steps, the best of both kept: the machine's neighbours only ever
// lower a measurement, and 12 passes in one moment proved too few on a shared host (a default run read 24.7 GB/s
// where bench moe, best of 28 spread over its iterations, read 30-31). The buffer must dwarf the LLC and leave the
// weights room: up to 40% of MemAvailable, skipped below 4 x LLC.
void CpuBackend::remeasure_ceilings(RooflineCeilings& c, const RunOptions& opt) const {
    const int64_t want = std::max<int64_t>(4 * llc_bytes(), int64_t(1) << 30);
    const int64_t bytes = std::min<int64_t>(want, mem_available_bytes() * 2 / 5);
    if (bytes < 4 * llc_bytes() || c.mem_bw_bytes_per_s <= 0) return;
    ReadBuffer buf(bytes, opt.num_threads);
    const Ceiling after = measure_read_bandwidth(buf, 12);
    c.mem_bw_bytes_per_s = std::max(c.mem_bw_bytes_per_s, after.value);
    c.detail["mem_bw"]["value"] = c.mem_bw_bytes_per_s;
    c.detail["mem_bw"]["method"] =
        c.detail["mem_bw"].value("method", std::string()) +
        fmt::format(
            " before the weights, and best of 12 over {:.0f} MiB after the steps: "
            "{:.2f} GB/s before, {:.2f} GB/s after, the higher kept",
            bytes / 1048576.0, c.detail["mem_bw"].value("before", 0.0) / 1e9, after.value / 1e9);
    c.note = "cpu: streaming read bandwidth (before the weights and after the steps) and OpenBLAS sgemm rate (fp32)";
}

}  // namespace moebench::cpu
