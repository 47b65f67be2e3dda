// SPDX-License-Identifier: Apache-2.0
// Dispatch payload formats of expert parallelism, as bytes on the wire: fp32, bf16 (round to nearest even), and
// fp8 e4m3 (OCP "FN": no infinities, largest finite 448) with one fp32 scale per 128 channels of a token row, as
// the fp8 dispatch of EP libraries sends it. Host code emulates the device formats bit for bit.
#pragma once
#include "core/precision.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace moebench::core {

enum class DispatchDtype { fp32, bf16, fp8 };

inline constexpr int64_t kFp8ScaleChannels = 128;  // channels per fp8 scale
inline constexpr float kE4m3Max = 448.0f;

/// Bytes one token row of `hidden` channels takes on the wire.
inline int64_t dispatch_row_bytes(DispatchDtype d, int64_t hidden) {
    switch (d) {
        case DispatchDtype::fp32: return 4 * hidden;
        case DispatchDtype::bf16: return 2 * hidden;
        case DispatchDtype::fp8: return hidden + 4 * ((hidden + kFp8ScaleChannels - 1) / kFp8ScaleChannels);
    }
    return 4 * hidden;
}

/// The wire format of rows dispatched in `d`; nullopt for a format that is not sent on the wire (int4).
inline std::optional<DispatchDtype> dispatch_wire(DType d) {
    switch (d) {
        case DType::fp32: return DispatchDtype::fp32;
        case DType::bf16: return DispatchDtype::bf16;
        case DType::fp8: return DispatchDtype::fp8;
        default: return std::nullopt;
    }
}

inline const char* to_string(DispatchDtype d) {
    return d == DispatchDtype::fp32 ? "fp32" : d == DispatchDtype::bf16 ? "bf16" : "fp8";
}

inline uint16_t bf16_from_float(float x) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40);  // NaN stays NaN
    b += 0x7fffu + ((b >> 16) & 1u);                                                      // round to nearest even
    return static_cast<uint16_t>(b >> 16);
}

inline float bf16_to_float(uint16_t h) {
    const uint32_t b = static_cast<uint32_t>(h) << 16;
    float x;
    std::memcpy(&x, &b, 4);
    return x;
}

/// e4m3: bias 7, 3 mantissa bits, subnormals of 2^-9; values beyond 448 saturate (the scale keeps |x| <= 448).
inline uint8_t e4m3_from_float(float x) {
    if (std::isnan(x)) return 0x7f;
    const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
    const float a = std::fabs(x);
    if (a >= kE4m3Max) return sign | 0x7e;
    if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (8 steps reach the smallest normal, code 0x08)
        const int q = static_cast<int>(std::nearbyint(a * 512.0f));
        return sign | static_cast<uint8_t>(q);
    }
    int ex = 0;
    const float f = std::frexp(a, &ex);  // a = f 2^ex, f in [0.5, 1)
    int e = ex - 1;                      // a = (2f) 2^e, 2f in [1, 2)
    int m = static_cast<int>(std::nearbyint((2.0f * f - 1.0f) * 8.0f));
    if (m == 8) {
        m = 0;
        ++e;
    }
    if (e > 8 || (e == 8 && m > 6)) return sign | 0x7e;
    return sign | static_cast<uint8_t>(((e + 7) << 3) | m);
}

inline float e4m3_to_float(uint8_t c) {
    const int e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7) return NAN;
    const float v =
        e == 0 ? static_cast<float>(m) * (1.0f / 512.0f) : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
    return (c & 0x80) ? -v : v;
}

/// One row of `hidden` floats into `dst` (dispatch_row_bytes(d, hidden) bytes).
inline void encode_row(DispatchDtype d, const float* x, int64_t hidden, uint8_t* dst) {
    if (d == DispatchDtype::fp32) {
        std::memcpy(dst, x, static_cast<size_t>(4 * hidden));
    } else if (d == DispatchDtype::bf16) {
        for (int64_t i = 0; i < hidden; ++i) {
            const uint16_t h = bf16_from_float(x[i]);
            std::memcpy(dst + 2 * i, &h, 2);
        }
    } else {
        uint8_t* scales = dst + hidden;
        for (int64_t b0 = 0; b0 < hidden; b0 += kFp8ScaleChannels) {
            const int64_t b1 = b0 + kFp8ScaleChannels < hidden ? b0 + kFp8ScaleChannels : hidden;
            float amax = 0.0f;
            for (int64_t i = b0; i < b1; ++i) amax = std::fmax(amax, std::fabs(x[i]));
            const float scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
            for (int64_t i = b0; i < b1; ++i) dst[i] = e4m3_from_float(x[i] / scale);
            std::memcpy(scales + 4 * (b0 / kFp8ScaleChannels), &scale, 4);
        }
    }
}

/// The inverse of encode_row (dequantised to fp32 on arrival).
inline void decode_row(DispatchDtype d, const uint8_t* src, int64_t hidden, float* x) {
    if (d == DispatchDtype::fp32) {
        std::memcpy(x, src, static_cast<size_t>(4 * hidden));
    } else if (d == DispatchDtype::bf16) {
        for (int64_t i = 0; i < hidden; ++i) {
            uint16_t h;
            std::memcpy(&h, src + 2 * i, 2);
            x[i] = bf16_to_float(h);
        }
    } else {
        const uint8_t* scales = src + hidden;
        for (int64_t i = 0; i < hidden; ++i) {
            float scale;
            std::memcpy(&scale, scales + 4 * (i / kFp8ScaleChannels), 4);
            x[i] = e4m3_to_float(src[i]) * scale;
        }
    }
}

}  // namespace moebench::core
