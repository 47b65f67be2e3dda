// SPDX-License-Identifier: Apache-2.0
// Element-wise and row kernels of the dense path: embedding gather, RMSNorm/LayerNorm, bias, residual add, strided
// copy.
#include "kernels/common.cuh"

namespace moebench::kernels {
namespace {

// One block per token; threads stride over the hidden dimension (coalesced).
__global__ void embed_kernel(const int32_t* ids, const bf16* table, bf16* out, int64_t hidden) {
    const int64_t t = blockIdx.x;
    const bf16* row = table + static_cast<int64_t>(ids[t]) * hidden;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) out[t * hidden + c] = row[c];
}

// One block per row. Steps: 1) fp32 mean (layernorm only) and mean of squares over the row; 2) normalise, scale, bias.
__global__ void norm_kernel(const bf16* x, int64_t x_stride, const bf16* w, const bf16* b, bf16* y, int64_t y_stride,
                            int64_t cols, int64_t heads_per_row, float eps, bool layernorm) {
    __shared__ float shm[32];
    const int64_t r = blockIdx.x;
    const int64_t outer = r / heads_per_row, inner = r % heads_per_row;
    const bf16* xr = x + outer * x_stride + inner * cols;
    bf16* yr = y + outer * y_stride + inner * cols;
    float mean = 0.0f;
    if (layernorm) {
        float s = 0.0f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += to_f(xr[c]);
        mean = block_sum(s, shm) / static_cast<float>(cols);
    }
    float sq = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = to_f(xr[c]) - mean;
        sq += v * v;
    }
    const float inv = rsqrtf(block_sum(sq, shm) / static_cast<float>(cols) + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = (to_f(xr[c]) - mean) * inv * to_f(w[c]);
        if (b) v += to_f(b[c]);
        yr[c] = to_bf(v);
    }
}

__global__ void add_bias_kernel(bf16* x, int64_t ld, const bf16* bias, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / cols, c = i % cols;
        x[r * ld + c] = to_bf(to_f(x[r * ld + c]) + to_f(bias[c]));
    }
}

__global__ void add_bias_f32_kernel(float* x, const float* bias, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        x[i] += bias[i % cols];
}

__global__ void add_inplace_kernel(bf16* y, const bf16* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = to_bf(to_f(y[i]) + to_f(x[i]));
}

__global__ void copy_2d_kernel(const bf16* src, int64_t src_ld, bf16* dst, int64_t dst_ld, int64_t rows, int64_t cols,
                               int64_t copies, int64_t copy_stride) {
    const int64_t n = rows * copies * cols;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t c = i % cols, j = (i / cols) % copies, r = i / (cols * copies);
        dst[r * dst_ld + j * copy_stride + c] = src[r * src_ld + c];
    }
}

}  // namespace

void launch_embed(const int32_t* ids, const bf16* table, bf16* out, int64_t num_tokens, int64_t hidden,
                  cudaStream_t stream) {
    if (num_tokens <= 0) return;
    embed_kernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(ids, table, out, hidden);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_norm(const bf16* x, int64_t x_row_stride, const bf16* w, const bf16* b, bf16* y, int64_t y_row_stride,
                 int64_t rows, int64_t cols, int64_t heads_per_row, float eps, bool layernorm, cudaStream_t stream) {
    if (rows <= 0) return;
    const int block = cols >= 1024 ? 256 : 128;
    norm_kernel<<<static_cast<unsigned>(rows), block, 0, stream>>>(
        x, x_row_stride, w, b, y, y_row_stride, cols, heads_per_row < 1 ? 1 : heads_per_row, eps, layernorm);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_add_bias(bf16* x, int64_t ld, const bf16* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows * cols <= 0) return;
    add_bias_kernel<<<grid_for(rows * cols, 256), 256, 0, stream>>>(x, ld, bias, rows, cols);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_add_bias_f32(float* x, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows * cols <= 0) return;
    add_bias_f32_kernel<<<grid_for(rows * cols, 256), 256, 0, stream>>>(x, bias, rows, cols);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_add_inplace(bf16* y, const bf16* x, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    add_inplace_kernel<<<grid_for(n, 256), 256, 0, stream>>>(y, x, n);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_copy_2d(const bf16* src, int64_t src_ld, bf16* dst, int64_t dst_ld, int64_t rows, int64_t cols,
                    cudaStream_t stream, int64_t copies, int64_t copy_stride) {
    if (rows * cols * copies <= 0) return;
    copy_2d_kernel<<<grid_for(rows * cols * copies, 256), 256, 0, stream>>>(src, src_ld, dst, dst_ld, rows, cols,
                                                                            copies, copy_stride);
    MOEBENCH_LAUNCH_CHECK();
}

}  // namespace moebench::kernels
