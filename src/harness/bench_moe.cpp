// SPDX-License-Identifier: Apache-2.0
// bench_moe as a run point on the engine's MoE-block plan: validate -> prepare -> measure (between the read passes
// that also evict the LLC) -> derive (the floor from counted work and the run's own ceilings) -> record.
#include "harness/bench_moe.hpp"

#include "backends/registry.hpp"
#include "common/document_context.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/host_environment.hpp"
#include "common/tensor_file.hpp"
#include "config/model_config.hpp"
#include "core/phase.hpp"
#include "core/report_keys.hpp"
#include "engine/backend.hpp"
#include "engine/engine.hpp"
#include "metrics/ceilings.hpp"
#include "metrics/timing_stats.hpp"
#include "model/phase_work.hpp"
#include "workload/workload.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>

namespace moebench {

namespace {

// The floor is this host's (read bandwidth and sgemm rate measured here), so the block runs on the cpu backend.
constexpr const char* kBenchBackend = "cpu";

json ceiling_json(const Ceiling& c) {
    return json{{"value", c.value}, {"unit", c.unit}, {"source", c.source}, {"method", c.method}};
}

// ---- validate: the request as one step of one MoE layer ----

struct BenchPoint {
    ModelConfig model;
    int64_t layer = -1;
    StepShape shape;
    RunOptions opt;
    int64_t num_tokens = 0;
};

int64_t bench_layer(const ModelConfig& model, int64_t asked) {
    if (model.moe.num_experts <= 0)
        config_error(flag_of("model"), "has no MoE layers", model.name,
                     "pick a MoE model (the short names are the files in configs/models)");
    int64_t layer = asked;
    for (int64_t l = 0; l < model.num_layers && layer < 0; ++l)
        if (model.is_moe_layer(l)) layer = l;
    if (layer < 0 || layer >= model.num_layers)
        config_error(flag_of("layer"), "outside the model", std::to_string(asked),
                     fmt::format("use 0..{}", model.num_layers - 1));
    if (!model.is_moe_layer(layer))
        config_error(flag_of("layer"), "is a dense layer", std::to_string(layer), "pick a MoE layer");
    return layer;
}

BenchPoint bench_point(const BenchMoeRequest& r) {
    if (r.model.empty())
        config_error(flag_of("model"), "is required", "", "use e.g. " + flag_of("model") + " olmoe-1b-7b");
    BenchPoint p;
    p.model = load_model(r.model);
    p.layer = bench_layer(p.model, r.layer);
    check_bench_moe_request(r);
    p.num_tokens = r.num_tokens > 0 ? r.num_tokens : bench_moe_default_tokens(r.mode);
    p.shape.mode = r.mode;
    if (r.mode == Mode::decode) {
        p.shape.batch = p.num_tokens;
        p.shape.context = 0;  // the block does not read the KV cache
    } else {
        p.shape.batch = 1;
        p.shape.seq_len = p.num_tokens;
    }
    p.opt.seed = static_cast<uint64_t>(r.seed);
    p.opt.num_threads = r.threads;
    p.opt.expert_gemm = r.expert_gemm;
    return p;
}

// ---- measure: the engine's MoE-block plan, between the read passes that also evict the LLC ----

// The read bandwidth and sgemm rate of this run. Other work on the machine only ever lowers a ceiling, so each is
// the best of passes taken before, between (the cache-evicting passes) and after the iterations.
struct BenchCeilings {
    ReadBuffer buf;
    Ceiling bw, gemm;
    double best_pass_s = 0;
    int64_t bw_passes = 0;
    std::vector<double> pass_rate;  // read rate of each evicting pass: the memory system next to each iteration
    int64_t threads = 1;

    explicit BenchCeilings(int64_t num_threads) : buf(0, num_threads), threads(num_threads) {
        bw = measure_read_bandwidth(buf, 8);
        gemm = measure_sgemm_rate(2048, threads, 5);
        best_pass_s = static_cast<double>(buf.bytes()) / bw.value;
        bw_passes = 8;
    }
    void evict() {
        const double s = buf.read_pass();
        best_pass_s = std::min(best_pass_s, s);
        ++bw_passes;
        pass_rate.push_back(static_cast<double>(buf.bytes()) / s);
    }
    void finish() {
        const Ceiling bw2 = measure_read_bandwidth(buf, 8);
        best_pass_s = std::min(best_pass_s, static_cast<double>(buf.bytes()) / bw2.value);
        bw_passes += 8;
        bw.value = static_cast<double>(buf.bytes()) / best_pass_s;
        bw.method = read_bandwidth_method(buf, bw_passes) + " passes before, between and after the iterations";
        const Ceiling gemm2 = measure_sgemm_rate(2048, threads, 3);
        if (gemm2.value > gemm.value) gemm.value = gemm2.value;
        gemm.method = fmt::format(
            "OpenBLAS sgemm 2048x2048x2048 (A.B^T) on {} threads, best of 8 (5 before and 3 "
            "after the iterations)",
            threads);
    }
};

struct BlockTimes {
    std::vector<std::vector<double>> phase_us;  // [phase of the plan][measured iteration]
    std::vector<double> block_us;
};

BlockTimes measure_block(Backend& backend, const std::vector<PhaseEntry>& plan, const BenchMoeRequest& r,
                         BenchCeilings& probe, int64_t layer) {
    // ffn_norm once: its output is the block's input.
    (void)run_step(backend, {PhaseEntry{Phase::ffn_norm, layer, 0}});
    BlockTimes t;
    t.phase_us.resize(plan.size());
    for (int64_t it = 0; it < r.warmup + r.iters; ++it) {
        if (!r.warm_cache) probe.evict();  // evict the weights: a real model's layers do not stay in the LLC
        const StepTimes st = run_step(backend, plan);
        if (it < r.warmup) continue;
        double sum = 0;
        for (size_t i = 0; i < plan.size(); ++i) {
            t.phase_us[i].push_back(st.phase_us[i]);
            sum += st.phase_us[i];
        }
        t.block_us.push_back(sum);
    }
    if (!r.warm_cache) probe.evict();
    probe.finish();
    return t;
}

// ---- derive and record ----

// Routing dump for peers (safetensors: topk_ids [T, k] int32, topk_weights [T, k] f32 + shapes).
void write_routing_dump(const BenchMoeRequest& r, const BenchPoint& p, const MoeLayerResult& res, int64_t threads) {
    const ModelConfig& model = p.model;
    TensorFile tf;
    const LayerRouting& lr = res.routing;
    tf.tensors.push_back(NamedTensor::i32("topk_ids", {lr.num_tokens, lr.k}, lr.ids.data()));
    tf.tensors.push_back(NamedTensor::f32("topk_weights", {lr.num_tokens, lr.k}, lr.weights.data()));
    tf.metadata = {{"model", model.name},
                   {"layer", std::to_string(p.layer)},
                   {"mode", to_string(r.mode)},
                   {"num_tokens", std::to_string(p.num_tokens)},
                   {"hidden_size", std::to_string(model.hidden_size)},
                   {"expert_intermediate_size", std::to_string(model.moe.expert_intermediate_size)},
                   {"num_experts", std::to_string(model.moe.num_experts)},
                   {"top_k", std::to_string(lr.k)},
                   {"num_shared_experts", std::to_string(model.moe.num_shared_experts)},
                   {"shared_intermediate_size", std::to_string(model.moe.shared_intermediate_size)},
                   {"activation", to_string(model.activation)},
                   {"routing_kind", to_string(model.moe.routing)},
                   {"routing_spec", r.routing},
                   {"threads", std::to_string(threads)},
                   {"seed", std::to_string(r.seed)},
                   {"source", "moebench bench moe"}};
    write_safetensors(r.dump_routing, tf);
}

// Each measured iteration against a floor from the faster of the read passes just before and after it: follows a
// neighbour's load, which the run's best pass does not.
json adjacent_pass_ratios(const BenchMoeRequest& r, const BenchCeilings& probe, const BlockTimes& t,
                          double weight_bytes, double flops) {
    std::vector<double> ratio, rate;
    for (int64_t i = 0; i < r.iters; ++i) {
        const size_t it = static_cast<size_t>(r.warmup + i);
        const double pr = std::max(probe.pass_rate[it], probe.pass_rate[it + 1]);
        rate.push_back(pr);
        ratio.push_back(t.block_us[static_cast<size_t>(i)] /
                        physical_floor(weight_bytes, flops, pr, probe.gemm.value).floor_us);
    }
    std::sort(ratio.begin(), ratio.end());
    std::sort(rate.begin(), rate.end());
    return {{"p50", percentile_sorted(ratio, 50)},
            {"min", ratio.front()},
            {"read_bandwidth_p50", percentile_sorted(rate, 50)},
            {"method",
             "each iteration's time over a floor whose read bandwidth is the faster of the LLC-evicting "
             "read passes just before and just after it (sgemm rate as above): follows a neighbour's "
             "load, which the run's best pass does not"}};
}

json bench_record(const BenchMoeRequest& r, const BenchPoint& p, const std::vector<PhaseEntry>& plan,
                  const BlockTimes& t, const BenchCeilings& probe, const MoeLayerResult& res,
                  const json& backend_info) {
    const ModelConfig& model = p.model;
    // Counted work of the phases whose matrix products read weights (the phase table's matmul), and the floor.
    double weight_bytes = 0, flops = 0;
    for (const PhaseEntry& e : plan) {
        if (!is_weight_matmul(e.phase)) continue;
        const PhaseWork w =
            phase_work(model, e.phase, p.layer, p.shape, res.tokens_per_expert, uniform_precision(DType::fp32), 1);
        weight_bytes += w.weight_bytes;
        flops += w.flops;
    }
    const Floor floor = physical_floor(weight_bytes, flops, probe.bw.value, probe.gemm.value);
    const TimingStats block = summarize(t.block_us);
    int64_t touched = 0;
    for (int64_t n : res.tokens_per_expert) touched += n > 0;

    json j;
    j["schema"] = "moebench.bench_moe/1";
    j["command"] = current_command_line("moebench bench moe");
    j["created_utc"] = utc_now(false);
    j["environment"] = environment_block();
    j["backend"] = backend_info;
    j["blas_core"] = openblas_get_corename();
    j["openblas_coretype_env"] = std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "";
    j["model"] = model.name;
    j["layer"] = p.layer;
    j["mode"] = to_string(r.mode);
    j["num_tokens"] = p.num_tokens;
    j["threads"] = probe.threads;
    j["routing"] = r.routing;
    j["cache"] = r.warm_cache ? "warm" : "cold (LLC evicted before each iteration)";
    j["warmup"] = r.warmup;
    j["iters"] = r.iters;
    j["tokens_per_expert"] = {{"source", "counted"}, {"values", res.tokens_per_expert}};
    j["experts_touched"] = touched;
    j["ceilings"] = {{"read_bandwidth", ceiling_json(probe.bw)}, {"sgemm", ceiling_json(probe.gemm)}};
    j["work"] = {{"source", "counted"},
                 {"weight_bytes", weight_bytes},
                 {"flops", flops},
                 {keys::kPhases, "router_gemm + expert_up + expert_down (+ shared_expert), touched experts only"}};
    j["floor"] = {{"source", "counted work / measured ceilings"},
                  {"memory_us", floor.memory_us},
                  {"compute_us", floor.compute_us},
                  {keys::kFloorUs, floor.floor_us},
                  {"bound", floor.bound}};
    json pj = json::object();
    for (size_t i = 0; i < plan.size(); ++i)
        pj[std::string(phase_name(plan[i].phase))] = to_json(summarize(t.phase_us[i]));
    j["time"] = {{"source", "measured"}, {"block", to_json(block)}, {keys::kPhases, pj}};
    j[keys::kRatioToFloor] = {{"p50", block.p50_us / floor.floor_us}, {"min", block.min_us / floor.floor_us}};
    // Faster than the floor means a ceiling was measured below what the machine does: said next to the ratio.
    const std::string floor_warning = below_floor_warning(floor, block.min_us);
    if (!floor_warning.empty()) j[keys::kRatioToFloor]["warning"] = floor_warning;
    if (!r.warm_cache)
        j[keys::kRatioToFloor]["adjacent_passes"] = adjacent_pass_ratios(r, probe, t, weight_bytes, flops);
    return j;
}

}  // namespace

int64_t bench_moe_default_tokens(Mode mode) { return mode == Mode::prefill ? 4096 : 8; }

void check_bench_moe_request(const BenchMoeRequest& r) {
    constexpr int64_t kMaxStepTokens = int64_t{1} << 26;  // as `run` (the cpu backend then checks host memory)
    if (r.num_tokens < 0 || r.num_tokens > kMaxStepTokens)
        config_error(flag_of("tokens"), "must be in 1..2^26 (67108864) tokens per step (0: the mode's default)",
                     std::to_string(r.num_tokens), "use fewer tokens, e.g. " + flag_of("tokens") + " 8");
    if (r.iters < 1 || r.iters > 1'000'000)
        config_error(flag_of("iters"), "must be in 1..1000000", std::to_string(r.iters),
                     "use e.g. " + flag_of("iters") + " 10");
    if (r.warmup < 0 || r.warmup > 1'000'000)
        config_error(flag_of("warmup"), "must be in 0..1000000", std::to_string(r.warmup),
                     "use e.g. " + flag_of("warmup") + " 2");
    if (r.threads < 0 || r.threads > 4096)
        config_error(flag_of("threads"), "must be in 0..4096", std::to_string(r.threads), "use 0 for all cores");
    if (r.seed < 0) config_error(flag_of("seed"), "must be >= 0", std::to_string(r.seed), "use a value >= 0");
}

json bench_moe(const BenchMoeRequest& r) {
    const BenchPoint p = bench_point(r);
    const std::vector<int64_t> layers = {p.layer};
    std::unique_ptr<Workload> workload = make_workload(r.routing, p.model, p.opt.seed, flag_of("routing"));
    workload->check_layers(layers);

    // One routing for every iteration, so that the torch peer can replay it.
    std::string why;
    std::unique_ptr<Backend> backend = make_backend(kBenchBackend, &why);
    backend->prepare(p.model, layers, p.shape, p.opt);
    std::optional<StepRouting> routing = workload->next_step(p.num_tokens, layers);
    backend->set_routing_override(routing ? &*routing : nullptr);
    const json backend_info = backend->describe();
    BenchCeilings probe(backend_info.value("threads", int64_t(1)));

    const std::vector<PhaseEntry> plan = moe_block_plan(p.model, p.layer, 0, 1);
    const BlockTimes t = measure_block(*backend, plan, r, probe, p.layer);
    const MoeLayerResult res = backend->moe_result(0);
    if (!r.dump_routing.empty()) write_routing_dump(r, p, res, probe.threads);
    return bench_record(r, p, plan, t, probe, res, backend_info);
}

}  // namespace moebench
