// SPDX-License-Identifier: Apache-2.0
// The conformance case list (tests/conformance_cases.hpp, shared with moebench_tests_cuda) on the cpu backend: every
// tiny model x every variant through run_point with --check. And the whole-step comparison the GPU runs (cuda against
// cpu) checked here on cpu steps: what it passes, what it must fail, and the near-ties it may excuse.
#include "conformance_cases.hpp"

#include <catch2/catch.hpp>

#include <numeric>

using namespace moebench;
using namespace moebench::test::conformance;

namespace {

std::string model_path(const std::string& name) { return data_dir() + "/models/" + name + ".json"; }

json variant_named(const std::string& name) {
    for (const json& v : variants())
        if (v.at("name") == name) return v;
    FAIL("no conformance variant " << name);
    return {};
}

StepOut cpu_step(const std::string& model, const std::string& variant, int64_t threads = 2, uint64_t seed = 7) {
    RunConfig cfg = run_config(model_path(model), variant_named(variant), "cpu", false);
    cfg.options.num_threads = threads;
    cfg.options.seed = seed;
    return run_one_step(cfg);
}

// The experts of token t in layer l by descending logit (the selection order of softmax/top-k routings).
std::vector<int32_t> by_logit(const MoeLayerOut& l, int64_t t, int64_t E) {
    std::vector<int32_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    const float* z = &l.logits[static_cast<size_t>(t * E)];
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
    return order;
}

// Makes token t of layer l a near-tie (its k-th and (k+1)-th logits equal in both steps) and gives `got` the
// (k+1)-th expert in place of the k-th. Returns the expert swapped in.
int32_t swap_at_tie(StepOut& ref, StepOut& got, size_t l, int64_t t) {
    const int64_t E = ref.model.moe.num_experts, k = ref.layers[l].k;
    const std::vector<int32_t> order = by_logit(ref.layers[l], t, E);
    const int32_t kth = order[static_cast<size_t>(k - 1)], next = order[static_cast<size_t>(k)];
    for (StepOut* s : {&ref, &got}) {
        float* z = &s->layers[l].logits[static_cast<size_t>(t * E)];
        z[next] = z[kth];
    }
    for (int64_t j = 0; j < k; ++j)
        if (got.layers[l].ids[static_cast<size_t>(t * k + j)] == kth)
            got.layers[l].ids[static_cast<size_t>(t * k + j)] = next;
    return next;
}

void scale_row(std::vector<float>& rows, int64_t t, int64_t H, float f) {
    for (int64_t i = 0; i < H; ++i) rows[static_cast<size_t>(t * H + i)] *= f;
}

}  // namespace

TEST_CASE("conformance: every tiny family model x every variant passes --check on the cpu backend", "[conformance]") {
    check_backend("cpu", false);
}

TEST_CASE(
    "conformance: the whole-step comparison over every case, cpu against cpu at another thread count (the path "
    "the GPU runs cuda against cpu)",
    "[conformance]") {
    compare_backends("cpu", "cpu", false, [](RunConfig& c) { c.options.num_threads = 1; });
}

TEST_CASE("conformance: the whole-step comparison passes equal steps and fails what differs", "[conformance]") {
    // tiny Mixtral-8x7B: both layers MoE, top-k then softmax (the selection order is the logits' order).
    const StepOut ref = cpu_step("tiny-mixtral-8x7b", "decode", 2);
    REQUIRE(ref.layers.size() == 2);
    const int64_t H = ref.model.hidden_size, k = ref.layers[0].k;
    const double tol = 2e-2;

    // The same step with another thread count: equal within fp32 summation order.
    const StepComparison same = compare_steps(ref, cpu_step("tiny-mixtral-8x7b", "decode", 1), tol, tol);
    INFO(same.failure);
    CHECK(same.passed);
    CHECK(same.worst_in_rel_l2 < 1e-5);
    CHECK(same.worst_out_rel_l2 < 1e-5);
    CHECK(same.excused == 0);
    CHECK(same.tokens == 16);

    // Another seed: other weights and tokens, so other rows and experts.
    const StepComparison other = compare_steps(ref, cpu_step("tiny-mixtral-8x7b", "decode", 2, 8), tol, tol);
    CHECK_FALSE(other.passed);
    CHECK_THAT(other.failure, Catch::Contains("moe_in relative L2 error"));

    // One token's output 10% off in the second layer: over 16 tokens that is ~2.5% relative L2, more than 1e-2.
    StepOut got = ref;
    scale_row(got.layers[1].moe_out, 3, H, 1.10f);
    StepComparison c = compare_steps(ref, got, 1e-2, 1e-3);
    CHECK_FALSE(c.passed);
    CHECK_THAT(c.failure, Catch::Contains("layer 1: moe_out relative L2 error"));
    CHECK(c.worst_out_rel_l2 > 1e-2);
    CHECK(c.worst_in_rel_l2 == 0);

    // One token's input off in the first layer (everything before the block: embedding, attention).
    got = ref;
    scale_row(got.layers[0].moe_in, 0, H, 1.2f);
    c = compare_steps(ref, got, tol, tol);
    CHECK_FALSE(c.passed);
    CHECK_THAT(c.failure, Catch::Contains("layer 0: moe_in relative L2 error"));

    // Another expert for a token whose scores do not tie: a mismatch, whatever the outputs.
    got = ref;
    {
        const std::vector<int32_t> order = by_logit(ref.layers[0], 5, ref.model.moe.num_experts);
        const int32_t kth = order[static_cast<size_t>(k - 1)], last = order.back();
        for (int64_t j = 0; j < k; ++j)
            if (got.layers[0].ids[static_cast<size_t>(5 * k + j)] == kth)
                got.layers[0].ids[static_cast<size_t>(5 * k + j)] = last;
    }
    c = compare_steps(ref, got, tol, tol);
    CHECK_FALSE(c.passed);
    CHECK(c.ids_mismatched == 1);
    CHECK_THAT(c.failure, Catch::Contains("layer 0: 1 of 16 tokens chose other experts, with no near-tie"));
}

TEST_CASE("conformance: the whole-step comparison excuses a near-tie and only what it reaches", "[conformance]") {
    const double tol = 2e-2;
    SECTION("decode: the tied token alone, from its layer on") {
        StepOut ref = cpu_step("tiny-mixtral-8x7b", "decode");
        const int64_t H = ref.model.hidden_size;
        StepOut got = ref;
        swap_at_tie(ref, got, 0, 4);
        scale_row(got.layers[0].moe_out, 4, H, 3.0f);  // its other expert changes its output...
        scale_row(got.layers[1].moe_in, 4, H, 3.0f);   // ...and everything after
        StepComparison c = compare_steps(ref, got, tol, tol);
        INFO(c.failure);
        CHECK(c.passed);
        CHECK(c.near_ties == 1);
        CHECK(c.excused == 1);
        CHECK(c.ids_mismatched == 0);
        // Another token of the batch (its own sequence in decode) is still compared.
        scale_row(got.layers[1].moe_out, 5, H, 1.5f);
        c = compare_steps(ref, got, tol, tol);
        CHECK_FALSE(c.passed);
        CHECK_THAT(c.failure, Catch::Contains("layer 1: moe_out"));
    }
    SECTION("prefill: the later tokens of its sequence in the next layer, not the other sequence") {
        StepOut ref = cpu_step("tiny-mixtral-8x7b", "prefill");  // 2 sequences x 12 tokens
        REQUIRE(ref.shape.seq_len == 12);
        const int64_t H = ref.model.hidden_size;
        StepOut got = ref;
        swap_at_tie(ref, got, 0, 3);
        scale_row(got.layers[0].moe_out, 3, H, 3.0f);
        scale_row(got.layers[1].moe_in, 9, H, 3.0f);  // token 9 of sequence 0 attends to token 3
        StepComparison c = compare_steps(ref, got, tol, tol);
        INFO(c.failure);
        CHECK(c.passed);
        CHECK(c.excused == 9);                        // tokens 3..11 of sequence 0 in the last layer
        scale_row(got.layers[1].moe_in, 2, H, 3.0f);  // token 2 comes before it: still compared
        c = compare_steps(ref, got, tol, tol);
        CHECK_FALSE(c.passed);
        scale_row(got.layers[1].moe_in, 2, H, 1.0f / 3.0f);
        scale_row(got.layers[1].moe_in, 12, H, 3.0f);  // sequence 1: still compared
        c = compare_steps(ref, got, tol, tol);
        CHECK_FALSE(c.passed);
    }
    SECTION("capacity: the tokens of the experts the tie touched, whose drops may change") {
        StepOut ref = cpu_step("tiny-mixtral-8x7b", "capacity");
        REQUIRE(ref.options.capacity_factor > 0);
        const int64_t H = ref.model.hidden_size, k = ref.layers[0].k;
        StepOut got = ref;
        const int32_t next = swap_at_tie(ref, got, 0, 2);
        // A later token of the expert swapped in loses its place in got (capacity), with no tie of its own.
        int64_t victim = -1;
        for (int64_t t = 3; t < 16 && victim < 0; ++t)
            for (int64_t j = 0; j < k; ++j)
                if (ref.layers[0].ids[static_cast<size_t>(t * k + j)] == next) {
                    victim = t;
                    got.layers[0].ids[static_cast<size_t>(t * k + j)] = -1;
                }
        REQUIRE(victim > 0);
        scale_row(got.layers[0].moe_out, victim, H, 2.0f);
        StepComparison c = compare_steps(ref, got, tol, tol);
        INFO(c.failure);
        CHECK(c.passed);
        CHECK(c.ids_mismatched == 0);
        CHECK(c.excused >= 2);
        // Without a capacity factor the same drop is a mismatch.
        got.options.capacity_factor = ref.options.capacity_factor = 0;
        c = compare_steps(ref, got, tol, tol);
        CHECK_FALSE(c.passed);
        CHECK(c.ids_mismatched == 1);
    }
}
