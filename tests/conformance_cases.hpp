// SPDX-License-Identifier: Apache-2.0
// The conformance case list, one definition for every test binary: every tiny model of tests/data/conformance/models/
// (made by tests/conformance.py from configs/models/) under every variant of tests/data/conformance/cases.json.
// - check_backend(): each case through run_point with --check on one backend: its MoE block against the fp32 host
//   reference (harness/check.cpp), within the tolerances of the backend's traits. moebench_tests_cpu runs it on cpu,
//   moebench_tests_cuda on cuda (on a GPU; scripts/device-check.sh runs it there).
// - run_one_step() + compare_steps(): the whole step of one backend against another's (cuda against cpu): the
//   residual stream entering and leaving every MoE layer run (moe_in, moe_out, the experts chosen), so embedding,
//   norms, attention, dense layers and the earlier MoE blocks are all compared, not the MoE block alone.
// tests/dump_check.py runs the same list against the numpy checker.
#pragma once
#include "test_paths.hpp"

#include "backends/registry.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "engine/engine.hpp"
#include "harness/check.hpp"
#include "harness/runner.hpp"
#include "harness/validate.hpp"
#include "workload/workload.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace moebench::test::conformance {

inline std::string data_dir() { return std::string(MOEBENCH_TEST_DATA) + "/conformance"; }

/// The tiny models, sorted by path.
inline std::vector<std::string> models() {
    std::vector<std::string> paths;
    for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/models"))
        if (e.path().extension() == ".json") paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    return paths;
}

/// The variants: run config fields with a "name".
inline json variants() { return load_json_file(data_dir() + "/cases.json", 1 << 20).at("variants"); }

inline std::string model_name(const std::string& path) { return std::filesystem::path(path).stem().string(); }

/// One case's run config: two layers, one measured step, fixed seed and threads.
inline RunConfig run_config(const std::string& model, const json& variant, const std::string& backend, bool check) {
    json j = variant;
    j.erase("name");
    j["model"] = model;
    j["backend"] = backend;
    j["layers"] = 2;
    j["warmup"] = 0;
    j["iters"] = 1;
    j["threads"] = 2;
    j["seed"] = 7;
    j["check"] = check;
    return run_config_from_json(j, "conformance");
}

/// Why `backend` does not run `model`'s forward path (linear attention on cuda, ...), as a user is told; "" if it does.
inline std::string skip_reason(const std::string& backend, const std::string& model) {
    try {
        check_backend_runs_model(*find_backend_traits(backend), load_model(model), {0, 1});
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

/// Every case on `backend` through run_point with --check: passed and no expert chosen otherwise than the reference
/// (near-ties excused by the check). `print`: one line per case on stdout (the device check's log keeps them).
inline void check_backend(const std::string& backend, bool print) {
    const json cases = variants();
    const std::vector<std::string> paths = models();
    REQUIRE(paths.size() >= 15);  // one per shipped MoE model
    REQUIRE(cases.size() >= 5);
    int64_t points = 0, skipped = 0;
    for (const std::string& model : paths) {
        if (const std::string why = skip_reason(backend, model); !why.empty()) {
            WARN("conformance: " << backend << " skips " << model_name(model) << ": " << why);
            skipped += static_cast<int64_t>(cases.size());
            continue;
        }
        for (const json& variant : cases) {
            const std::string name = variant.at("name").get<std::string>();
            INFO(backend << " " << model_name(model) << " " << name);
            const json record = run_point(run_config(model, variant, backend, true));
            REQUIRE(record.contains("check"));
            const json& c = record["check"];
            INFO("check: " << c.dump());
            if (print)
                std::printf(
                    "conformance-check backend=%s model=%s variant=%s passed=%d rel_l2=%.3e tolerance=%.1e "
                    "ids_mismatched=%lld ids_near_tie=%lld\n",
                    backend.c_str(), model_name(model).c_str(), name.c_str(), c.value("passed", false) ? 1 : 0,
                    c["rel_l2_error"].is_number() ? c["rel_l2_error"].get<double>() : -1.0, c.value("tolerance", 0.0),
                    static_cast<long long>(c.value("ids_mismatched", int64_t{-1})),
                    static_cast<long long>(c.value("ids_near_tie", int64_t{-1})));
            CHECK(c.value("passed", false));
            CHECK(c.value("ids_mismatched", -1) == 0);
            ++points;
        }
    }
    CHECK(points + skipped == static_cast<int64_t>(paths.size() * cases.size()));
    CHECK(points > 0);
}

// ---- the whole step of one backend against another's ----------------------------------------------------------------

/// What one MoE layer of a step leaves: its input and output rows [T, H], the experts chosen [T, k] (after capacity:
/// -1 dropped) and the router logits [T, E].
struct MoeLayerOut {
    int64_t layer = -1;
    std::vector<float> moe_in, moe_out, logits, correction;  // correction: the score-correction bias [E] or empty
    std::vector<int32_t> ids;
    int64_t k = 0;
};

/// One step of `cfg` (as run_point prepares it: the workload's routing, the backend's resolved options).
struct StepOut {
    ModelConfig model;
    RunOptions options;
    StepShape shape;
    double tolerance = 0;  // the backend's --check tolerance (its traits)
    std::vector<MoeLayerOut> layers;
};

inline std::vector<float> tensor_f32(const std::vector<NamedTensor>& ts, const std::string& name, bool required) {
    for (const NamedTensor& t : ts)
        if (t.name == name) return t.as_f32();
    if (required) FAIL("moe_block_tensors has no " << name);
    return {};
}

inline StepOut run_one_step(const RunConfig& given) {
    RunConfig cfg = given;
    validate_run(cfg);
    StepOut out;
    out.model = load_model(cfg.model);
    out.shape = cfg.shape;
    const std::vector<int64_t> layers = layers_to_run(out.model, cfg);
    std::unique_ptr<Workload> workload = make_workload(cfg.routing, out.model, cfg.options.seed, "routing");
    workload->check_layers(layers);
    if (cfg.shape.mode == Mode::decode) workload->interleave_sequences(cfg.shape.batch);
    std::string note;
    std::unique_ptr<Backend> backend = make_backend(cfg.backend, &note, cfg.hardware);
    const BackendTraits traits = backend->traits();
    check_backend_accepts(traits, cfg);
    check_backend_runs_model(traits, out.model, layers);
    out.options = resolved_options(cfg, traits);
    out.tolerance = traits.check.tolerance;
    backend->prepare(out.model, layers, cfg.shape, out.options);
    const std::optional<StepRouting> routing = workload->next_step(cfg.shape.num_tokens(), layers);
    backend->set_routing_override(routing ? &*routing : nullptr);
    run_step(*backend, step_plan(out.model, layers, 1, cfg.include_lm_head));
    for (size_t s = 0; s < layers.size(); ++s) {
        if (!out.model.is_moe_layer(layers[s])) continue;
        const int64_t slot = static_cast<int64_t>(s);
        const TensorAccess* tensors = backend->capability<TensorAccess>();
        REQUIRE(tensors != nullptr);  // the conformance runs only backends that offer tensors
        const std::vector<NamedTensor> t = tensors->moe_block_tensors(slot);
        MoeLayerOut l;
        l.layer = layers[s];
        l.moe_in = tensor_f32(t, "moe_in", true);
        l.moe_out = tensor_f32(t, "moe_out", true);
        l.correction = tensor_f32(t, "e_score_correction_bias", false);
        for (const NamedTensor& n : t)
            if (n.name == "topk_ids") {
                l.ids = n.as_i32();
                l.k = n.shape.at(1);
            }
        l.logits = backend->moe_result(slot).router_logits;
        out.layers.push_back(std::move(l));
    }
    return out;
}

struct StepComparison {
    bool passed = true;
    std::string failure;          // every reason, "; "-separated
    double worst_in_rel_l2 = 0;   // over the MoE layers: moe_in rows compared
    double worst_out_rel_l2 = 0;  // moe_out rows compared
    int64_t tokens = 0;           // per layer
    int64_t excused = 0;          // tokens left out of the last layer's comparison (near-ties and what follows)
    int64_t ids_mismatched = 0;   // tokens whose experts differ without a near-tie (summed over layers)
    int64_t near_ties = 0;        // tokens whose experts differ at a near-tie (summed over layers)
};

/// Relative L2 of `got` against `ref` over the rows of `rows` ([T, H] both).
inline double rows_rel_l2(const std::vector<float>& ref, const std::vector<float>& got, int64_t H,
                          const std::vector<int64_t>& rows) {
    double d2 = 0, r2 = 0;
    for (int64_t t : rows)
        for (int64_t i = 0; i < H; ++i) {
            const double r = ref[static_cast<size_t>(t * H + i)], g = got[static_cast<size_t>(t * H + i)];
            d2 += (g - r) * (g - r);
            r2 += r * r;
        }
    const double e = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
    return std::isfinite(e) ? e : INFINITY;
}

/// `got`'s step against `ref`'s (same model, options and shape): per MoE layer in order, moe_in and moe_out within
/// `tolerance` (relative L2 over the tokens compared) and the same experts per token. Where the experts differ and
/// either backend's scores tie within `tie_eps` (routing_near_tie), the token is excused, and with it what its other
/// expert changes later: its own rows from then on; in a prefill the later tokens of its sequence from the next layer
/// on (their attention reads it); under a capacity factor every token routed to an expert either choice touched (their
/// drops may change). Experts that differ with no tie fail the comparison; so does a layer with nothing left to
/// compare.
inline StepComparison compare_steps(const StepOut& ref, const StepOut& got, double tolerance, double tie_eps) {
    StepComparison c;
    auto fail = [&](const std::string& why) {
        c.passed = false;
        c.failure += (c.failure.empty() ? "" : "; ") + why;
    };
    const ModelConfig& m = ref.model;
    const int64_t T = ref.shape.num_tokens(), H = m.hidden_size, E = m.moe.num_experts;
    const int64_t per_seq = ref.shape.mode == Mode::prefill ? ref.shape.seq_len : 1;
    c.tokens = T;
    if (ref.layers.size() != got.layers.size() || ref.layers.empty()) {
        fail(fmt::format("{} MoE layers against {}", got.layers.size(), ref.layers.size()));
        return c;
    }
    std::vector<unsigned char> excused(static_cast<size_t>(T), 0);
    for (size_t l = 0; l < ref.layers.size(); ++l) {
        const MoeLayerOut &a = ref.layers[l], &b = got.layers[l];
        const int64_t k = a.k;
        if (a.layer != b.layer || b.k != k || static_cast<int64_t>(a.moe_in.size()) != T * H ||
            b.moe_in.size() != a.moe_in.size() || b.moe_out.size() != a.moe_in.size() ||
            a.moe_out.size() != a.moe_in.size() || static_cast<int64_t>(a.ids.size()) != T * k ||
            b.ids.size() != a.ids.size() || static_cast<int64_t>(a.logits.size()) != T * E ||
            b.logits.size() != a.logits.size()) {
            fail(fmt::format("layer {}: the two steps' tensors differ in shape", a.layer));
            return c;
        }
        auto compared = [&] {
            std::vector<int64_t> rows;
            for (int64_t t = 0; t < T; ++t)
                if (!excused[static_cast<size_t>(t)]) rows.push_back(t);
            return rows;
        };
        // 1. The residual stream into the block (everything before it in the step).
        std::vector<int64_t> rows = compared();
        if (rows.empty()) {
            fail(fmt::format("layer {}: every token was excused by near-ties, nothing left to compare", a.layer));
            return c;
        }
        const double in_err = rows_rel_l2(a.moe_in, b.moe_in, H, rows);
        c.worst_in_rel_l2 = std::max(c.worst_in_rel_l2, in_err);
        if (!(in_err <= tolerance))
            fail(fmt::format("layer {}: moe_in relative L2 error {:.3g} exceeds {:.3g}", a.layer, in_err, tolerance));
        // 2. The experts chosen: differences at a near-tie are excused (with what they touch), others fail.
        auto set_of = [&](const std::vector<int32_t>& ids, int64_t t) {
            std::vector<int32_t> s(ids.begin() + t * k, ids.begin() + (t + 1) * k);
            std::sort(s.begin(), s.end());
            return s;
        };
        std::vector<int64_t> differing, tied;
        for (int64_t t : rows)
            if (set_of(a.ids, t) != set_of(b.ids, t)) differing.push_back(t);
        const float* corr_a = a.correction.empty() ? nullptr : a.correction.data();
        const float* corr_b = b.correction.empty() ? nullptr : b.correction.data();
        for (int64_t t : differing)
            if (routing_near_tie(m, ref.options, &a.logits[static_cast<size_t>(t * E)], corr_a, tie_eps) ||
                routing_near_tie(m, got.options, &b.logits[static_cast<size_t>(t * E)], corr_b, tie_eps))
                tied.push_back(t);
        std::set<int32_t> touched;  // experts either choice of a tied token names
        for (int64_t t : tied) {
            excused[static_cast<size_t>(t)] = 1;
            for (int64_t j = 0; j < k; ++j) {
                touched.insert(a.ids[static_cast<size_t>(t * k + j)]);
                touched.insert(b.ids[static_cast<size_t>(t * k + j)]);
            }
        }
        touched.erase(-1);
        if (ref.options.capacity_factor > 0 && !touched.empty())
            for (int64_t t : rows)
                for (int64_t j = 0; j < k; ++j)
                    if (touched.count(a.ids[static_cast<size_t>(t * k + j)]) ||
                        touched.count(b.ids[static_cast<size_t>(t * k + j)]))
                        excused[static_cast<size_t>(t)] = 1;
        c.near_ties += static_cast<int64_t>(tied.size());
        int64_t mismatched = 0;
        for (int64_t t : differing)
            if (!excused[static_cast<size_t>(t)]) ++mismatched;
        c.ids_mismatched += mismatched;
        if (mismatched > 0)
            fail(
                fmt::format("layer {}: {} of {} tokens chose other experts, with no near-tie", a.layer, mismatched, T));
        // 3. The block's output over the tokens still compared.
        rows = compared();
        if (rows.empty()) {
            fail(fmt::format("layer {}: every token was excused by near-ties, nothing left to compare", a.layer));
            return c;
        }
        c.excused = T - static_cast<int64_t>(rows.size());
        const double out_err = rows_rel_l2(a.moe_out, b.moe_out, H, rows);
        c.worst_out_rel_l2 = std::max(c.worst_out_rel_l2, out_err);
        if (!(out_err <= tolerance))
            fail(fmt::format("layer {}: moe_out relative L2 error {:.3g} exceeds {:.3g}", a.layer, out_err, tolerance));
        // 4. A prefill token excused here reaches the later tokens of its sequence through the next layer's attention.
        for (int64_t t = 0; t < T; ++t)
            if (excused[static_cast<size_t>(t)])
                for (int64_t u = t + 1; u < (t / per_seq + 1) * per_seq; ++u) excused[static_cast<size_t>(u)] = 1;
    }
    return c;
}

/// Every case, the whole step of `got_backend` against `ref_backend`'s (compare_steps; `adjust_got` may change the
/// second run's config). The tolerance: twice the looser backend's --check tolerance (a MoE block's), for the bf16
/// roundings of two layers in the residual stream (each phase rounds its output); scores tie within the same margin.
/// The KV caches hold random rows that each backend fills in its own layout (cuda caches MLA's latent row, cpu the
/// per-head keys and values), so decode steps are compared from an empty cache (context 0).
inline void compare_backends(const std::string& ref_backend, const std::string& got_backend, bool print,
                             const std::function<void(RunConfig&)>& adjust_got = {}) {
    int64_t compared = 0, skipped = 0;
    for (const std::string& model : models()) {
        std::string why = skip_reason(got_backend, model);
        if (why.empty()) why = skip_reason(ref_backend, model);
        if (!why.empty()) {
            WARN("conformance: " << got_backend << " vs " << ref_backend << " skips " << model_name(model) << ": "
                                 << why);
            ++skipped;
            continue;
        }
        for (const json& variant : variants()) {
            const std::string name = variant.at("name").get<std::string>();
            INFO(got_backend << " vs " << ref_backend << ": " << model_name(model) << " " << name);
            json v = variant;
            if (v.value("mode", std::string("decode")) == "decode") v["context"] = 0;
            const StepOut ref = run_one_step(run_config(model, v, ref_backend, false));
            RunConfig got_cfg = run_config(model, v, got_backend, false);
            if (adjust_got) adjust_got(got_cfg);
            const StepOut got = run_one_step(got_cfg);
            const double tol = 2 * std::max(ref.tolerance, got.tolerance);
            const StepComparison c = compare_steps(ref, got, tol, tol);
            if (print)
                std::printf(
                    "conformance-step backend=%s reference=%s model=%s variant=%s passed=%d "
                    "moe_in_rel_l2=%.3e moe_out_rel_l2=%.3e tolerance=%.1e tokens=%lld excused=%lld "
                    "near_ties=%lld ids_mismatched=%lld%s%s\n",
                    got_backend.c_str(), ref_backend.c_str(), model_name(model).c_str(), name.c_str(), c.passed ? 1 : 0,
                    c.worst_in_rel_l2, c.worst_out_rel_l2, tol, static_cast<long long>(c.tokens),
                    static_cast<long long>(c.excused), static_cast<long long>(c.near_ties),
                    static_cast<long long>(c.ids_mismatched), c.passed ? "" : " failure=", c.failure.c_str());
            INFO(c.failure);
            CHECK(c.passed);
            ++compared;
        }
    }
    CHECK(compared > 0);
    CHECK(compared + skipped * static_cast<int64_t>(variants().size()) ==
          static_cast<int64_t>(models().size() * variants().size()));
}

}  // namespace moebench::test::conformance
