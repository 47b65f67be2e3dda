// SPDX-License-Identifier: Apache-2.0
// GPU discovery (cuda_available), the `moebench devices` JSON and the measured ceilings (copy, read, bf16 GEMM).
#include "backends/cuda/device_info.hpp"

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/device_buffer.hpp"
#include "backends/cuda/nvml.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/launch.hpp"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <string>

namespace moebench {
namespace {

std::string version_string(int v) {  // CUDA encodes 13000 as 13.0
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

/// Device count without throwing: cudaErrorNoDevice / cudaErrorInsufficientDriver (and any other failure) -> 0.
int device_count(std::string* reason) {
    int count = 0;  // cudaGetDeviceCount leaves it unwritten on failure
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        if (reason) {
            *reason = std::string("no usable GPU: ") + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")";
            if (err == cudaErrorInsufficientDriver) *reason += "; no NVIDIA driver is loaded on this machine";
        }
        cudaGetLastError();
        return 0;
    }
    if (count == 0 && reason) *reason = "no GPU found (the driver reports zero devices)";
    if (count > 0 && reason) *reason = std::to_string(count) + " GPU(s)";
    return count;
}

json libraries_json() {
    json lib;
    int rt = 0;
    lib["cuda_runtime"] = cudaRuntimeGetVersion(&rt) == cudaSuccess ? json(version_string(rt)) : json("unknown");
    lib["cuda_runtime_compiled"] = version_string(CUDART_VERSION);
    int drv = 0;
    if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0)
        lib["cuda_driver_api"] = version_string(drv);
    else
        lib["cuda_driver_api"] = "none (no NVIDIA driver loaded)";
    cudaGetLastError();
    std::string why;
    const std::string drv_str = nvml_driver_version(&why);
    lib["driver_version"] = drv_str.empty() ? json(why) : json(drv_str);
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
        lib["cublas"] = fmt::format("{}.{}.{}", major, minor, patch);
    else
        lib["cublas"] = "unknown";
    lib["cublas_compiled"] = fmt::format("{}.{}.{}", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
    lib["cublaslt"] = std::to_string(cublasLtGetVersion());
#if MOEBENCH_HAS_NCCL
    int nccl = 0;
    if (ncclGetVersion(&nccl) == ncclSuccess)
        lib["nccl"] = fmt::format("{}.{}.{}", nccl / 10000, (nccl % 10000) / 100, nccl % 100);
    else
        lib["nccl"] = "unknown";
#else
    lib["nccl"] = "not built in (NCCL was not found when moebench was built)";
#endif
    return lib;
}

json device_json(int index);
json device_json_impl(int index) {
    json d;
    cudaDeviceProp prop{};
    MOEBENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    char bus[32] = {0};
    MOEBENCH_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), index));
    auto attr = [&](cudaDeviceAttr a) {
        int v = 0;
        MOEBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&v, a, index));
        return static_cast<int64_t>(v);
    };
    d["index"] = index;
    d["name"] = prop.name;
    d["pci_bus_id"] = bus;
    d["compute_capability"] = fmt::format("{}.{}", prop.major, prop.minor);
    d["sms"] = prop.multiProcessorCount;
    d["memory_total_bytes"] = static_cast<int64_t>(prop.totalGlobalMem);
    d["l2_cache_bytes"] = prop.l2CacheSize;
    d["shared_memory_per_sm_bytes"] = static_cast<int64_t>(prop.sharedMemPerMultiprocessor);
    const int64_t sm_khz = attr(cudaDevAttrClockRate);
    const int64_t mem_khz = attr(cudaDevAttrMemoryClockRate);
    const int64_t bus_bits = attr(cudaDevAttrGlobalMemoryBusWidth);
    d["sm_clock_max_mhz"] = sm_khz / 1000;
    d["memory_clock_max_mhz"] = mem_khz / 1000;
    d["memory_bus_width_bits"] = bus_bits;
    // Double data rate: two transfers per memory clock. From the driver's attributes, not measured.
    d["memory_bw_theoretical_bytes_per_s"] =
        2.0 * static_cast<double>(mem_khz) * 1e3 * static_cast<double>(bus_bits) / 8.0;
    d["memory_bw_theoretical_source"] = "counted (memory clock x bus width x 2 from CUDA device attributes)";
    size_t free_b = 0, total_b = 0;
    MOEBENCH_CUDA_CHECK(cudaSetDevice(index));
    MOEBENCH_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    d["memory_free_bytes"] = static_cast<int64_t>(free_b);
    d["nvml"] = nvml_device_json(bus);
    return d;
}

/// Restores the calling thread's current device on scope exit (describe() runs while a backend uses its device).
class DeviceGuard {
public:
    DeviceGuard() { cudaGetDevice(&prev_); }
    ~DeviceGuard() { cudaSetDevice(prev_); }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int prev_ = 0;
};

/// Times `reps` calls of fn between two events after `warm` untimed calls; returns seconds per call.
template <typename F>
double time_per_call_s(cudaStream_t stream, int warm, int reps, F&& fn) {
    for (int i = 0; i < warm; ++i) fn();
    CudaEvent start, stop;
    MOEBENCH_CUDA_CHECK(cudaEventRecord(start.get(), stream));
    for (int i = 0; i < reps; ++i) fn();
    MOEBENCH_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
    MOEBENCH_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    return static_cast<double>(ms) * 1e-3 / reps;
}

json device_json(int index) {
    DeviceGuard guard;
    return device_json_impl(index);
}

}  // namespace

bool cuda_available(std::string* reason) {
    try {
        return device_count(reason) > 0;
    } catch (...) {  // never throws: a failure to probe is "no GPU"
        if (reason) *reason = "no usable GPU: CUDA probe failed";
        return false;
    }
}

json measure_device_ceilings(int index) {
    DeviceGuard guard;
    MOEBENCH_CUDA_CHECK(cudaSetDevice(index));
    CudaStream stream;
    json m;
    m["source"] = "measured";
    size_t free_b = 0, total_b = 0;
    MOEBENCH_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    int num_sms = 0;
    MOEBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, index));

    // Copy and read bandwidth over buffers far larger than L2 (1 GiB, or a quarter of free memory if smaller).
    const size_t buf_bytes = std::min<size_t>(size_t(1) << 30, (free_b / 4) & ~size_t(4095));
    {
        DeviceBuffer<uint8_t> a(buf_bytes), b(buf_bytes);
        MOEBENCH_CUDA_CHECK(cudaMemsetAsync(a.get(), 1, buf_bytes, stream.get()));
        DeviceBuffer<unsigned long long> sink(1);
        const double copy_s = time_per_call_s(stream.get(), 2, 10, [&] {
            MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), buf_bytes, cudaMemcpyDeviceToDevice, stream.get()));
        });
        const double read_s = time_per_call_s(stream.get(), 2, 10, [&] {
            kernels::launch_read_bytes(a.get(), buf_bytes, sink.get(), num_sms, stream.get());
        });
        m["buffer_bytes"] = static_cast<int64_t>(buf_bytes);
        // A device-to-device copy reads and writes every byte: count both directions.
        m["copy_bw_bytes_per_s"] = 2.0 * static_cast<double>(buf_bytes) / copy_s;
        m["copy_bw_note"] = "cudaMemcpyAsync device-to-device; read + write bytes counted";
        m["read_bw_bytes_per_s"] = static_cast<double>(buf_bytes) / read_s;
        m["read_bw_note"] = "own kernel, 16-byte loads, grid-stride";
    }
    // Dense bf16 GEMM rate: cublasGemmEx, bf16 in/out, fp32 accumulate, square 8192 (or smaller if memory is short).
    {
        int64_t n = 8192;
        while (n > 1024 && static_cast<size_t>(3 * n * n * 2) > free_b / 2) n /= 2;
        DeviceBuffer<kernels::bf16> A(n * n), B(n * n), C(n * n);
        kernels::launch_fill_bf16(A.get(), n * n, 0x1234, 0, 1.0f, 0.0f, stream.get());
        kernels::launch_fill_bf16(B.get(), n * n, 0x5678, 0, 1.0f, 0.0f, stream.get());
        CublasHandle handle(stream.get());
        const float alpha = 1.0f, beta = 0.0f;
        const int ni = static_cast<int>(n);
        const double gemm_s = time_per_call_s(stream.get(), 3, 10, [&] {
            MOEBENCH_CUBLAS_CHECK(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, ni, ni, ni, &alpha, A.get(),
                                               CUDA_R_16BF, ni, B.get(), CUDA_R_16BF, ni, &beta, C.get(), CUDA_R_16BF,
                                               ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        });
        m["bf16_gemm_flops"] = 2.0 * static_cast<double>(n) * n * n / gemm_s;
        m["bf16_gemm_shape"] = {n, n, n};
        m["bf16_gemm_note"] = "cublasGemmEx CUDA_R_16BF, CUBLAS_COMPUTE_32F, random inputs";
    }
    m["repetitions"] = 10;
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    return m;
}

json cuda_devices_json(bool measure) {
    json out;
    std::string reason;
    const int count = device_count(&reason);
    out["available"] = count > 0;
    out["reason"] = reason;
    out["device_count"] = count;
    out["libraries"] = libraries_json();
    std::string nvml_why;
    const std::string drv = nvml_driver_version(&nvml_why);
    out["nvml"] = drv.empty() ? json{{"available", false}, {"reason", nvml_why}} : json{{"available", true}};
    out["devices"] = json::array();
    for (int i = 0; i < count; ++i) {
        json d;
        try {
            d = device_json(i);
            if (measure) d["measured"] = measure_device_ceilings(i);
        } catch (const Error& e) {
            d["index"] = i;
            d["error"] = e.what();
        }
        out["devices"].push_back(std::move(d));
    }
    if (count == 0 && measure) out["measured"] = "not measured: " + reason;
    return out;
}

}  // namespace moebench
