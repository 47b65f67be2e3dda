// SPDX-License-Identifier: Apache-2.0
// Seeded randomness for synthetic routing: a counter-based generator (one stream per layer and token, so the
// output does not depend on how the stream is cut into steps), popularity shares, and k-of-E sampling with
// exact per-expert inclusion probabilities.
#pragma once
#include <cstdint>
#include <vector>

namespace moebench::sampling {

/// splitmix64 finaliser: a bijective 64-bit mix.
inline uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/// Key of one stream: mixes the seed with up to four labels (purpose tag, layer, token position, ...).
inline uint64_t stream_key(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0) {
    uint64_t h = mix64(seed ^ 0x6d6f6562656e6368ULL);
    h = mix64(h ^ a);
    h = mix64(h ^ (b + 0x1234567ULL));
    h = mix64(h ^ (c + 0x89abcdefULL));
    return mix64(h ^ (d + 0x5bd1e995ULL));
}

/// Small generator over one stream (splitmix64 sequence).
class Rng {
public:
    explicit Rng(uint64_t key) : state_(key) {}
    uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ULL); }
    /// Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    /// Uniform integer in [0, n) (Lemire's multiply; bias < 2^-32 for n < 2^32, negligible here).
    int64_t below(int64_t n) {
        return static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
    }

private:
    uint64_t state_;
};

/// Tags that separate the purposes of the streams.
enum Tag : uint64_t {
    kTagPerm = 1,
    kTagPick = 2,
    kTagWeights = 3,
    kTagSwitch = 4,
    kTagDomain = 5,
    kTagDomainPerm = 6,
    kTagRunSet = 7,
    kTagStatistics = 8
};

/// A seeded permutation of 0..n-1 (Fisher-Yates).
std::vector<int32_t> permutation(int64_t n, uint64_t key);

/// Zipf shares over ranks 1..E (share ∝ rank^-s), then capped at 1/k per expert (an expert can be chosen at most
/// once per token) with the excess spread over the uncapped ranks in proportion to their shares. Sums to 1.
std::vector<double> zipf_shares(int64_t num_experts, int64_t top_k, double exponent);

/// Caps shares at 1/k as above (shares must sum to 1).
void cap_shares(std::vector<double>& shares, int64_t top_k);

/// Picks k distinct indices with inclusion probability k * shares[i] for each i (shares sum to 1, each <= 1/k):
/// systematic sampling over a random order of the indices. Appends to `out`.
void sample_k_of_n(const std::vector<double>& shares, int64_t k, Rng& rng, std::vector<int32_t>& out);

/// k weights: normalised exponential draws (a flat Dirichlet), sorted descending.
void dirichlet_weights(int64_t k, Rng& rng, float* out);

}  // namespace moebench::sampling
