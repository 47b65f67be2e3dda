// SPDX-License-Identifier: Apache-2.0
// The sim backend: no weights, no data; each phase's time is modeled from its counted work (phase_work) and the
// hardware profile. Under expert parallelism every phase is modeled per rank and the slowest rank sets the time.
#include "backends/sim/sim_backend.hpp"
#include "backends/sim/sim_routing.hpp"

#include "common/did_you_mean.hpp"
#include "common/error.hpp"
#include "common/file_memo.hpp"
#include "common/flag_names.hpp"
#include "common/host_memory.hpp"
#include "common/read_file.hpp"
#include "config/run_fields.hpp"
#include "core/moe_core.cuh"
#include "core/report_keys.hpp"
#include "metrics/rank_times.hpp"
#include "model/accounting.hpp"
#include "model/decode_floor.hpp"
#include "model/memory_plan.hpp"
#include "workload/expert_cache.hpp"
#include "workload/offload_replay.hpp"
#include "workload/workload.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

namespace moebench {
namespace {

class SimBackend final : public Backend {
public:
    SimBackend(HardwareProfile hw, SimParams p) : hw_(std::move(hw)), p_(p) {}

    BackendTraits traits() const override { return sim_backend_traits(hw_, p_); }

    // Whether the deployment it models fits the profile's GPUs, counted as moebench plan counts it (memory_, set by
    // prepare: the whole model's weights per GPU under the run's layout and formats, block scales included, the KV
    // cache of the step's batch and context, its activations and workspace; whatever --layers ran). A profile
    // without a capacity fits anything.
    ModeledFit modeled_fit() const {
        ModeledFit f;
        f.fits = !(hw_.memory_bytes > 0) || memory_.fits;
        if (f.fits) return f;
        const FitAdvice a = fit_advice(model_, hw_, deployment_, memory_);
        f.field = a.field;
        f.what = a.what;
        f.value = a.value;
        f.fix = a.fix;
        return f;
    }

    // What the deployment holds per GPU (model/memory_plan.cpp, as moebench plan counts it).
    json memory_json() const {
        json by_component = json::object();
        for (int c = 0; c < kNumComponents; ++c)
            by_component[std::string(kComponentNames[c])] = memory_.weights_by_component_bytes[static_cast<size_t>(c)];
        return {
            {"source", "modeled"},
            {"basis", "model/memory_plan.cpp, as moebench plan counts it: the whole model (MTP excluded, whatever " +
                          flag_of("layers") +
                          " ran) under the run's layout and number formats (block scales "
                          "included), the KV cache and activations of the step's batch and context"},
            {"capacity_bytes", memory_.capacity_bytes},
            {"weights_bytes", memory_.weights_bytes},
            {"weights_by_component_bytes", by_component},
            {"kv_cache_bytes", memory_.kv_cache_bytes},
            {"activation_bytes", memory_.activation_bytes},
            {"free_bytes", memory_.free_bytes},
            {"weights_fit", memory_.weights_fit},
            {"fits", memory_.fits}};
    }

    json describe() const override {
        return json{{"hardware", hardware_to_json(hw_)},
                    {"peak_flops", peaks_.empty() ? sim_peak_flops(hw_, p_) : peaks_.at(opt_.precision.dense_weights)},
                    {"peak_flops_by_format", peak_flops_by_format_},
                    {"dtype", to_string(opt_.precision.dense_weights)},
                    {"precision", opt_.precision.describe()},
                    {"memory_per_gpu", memory_json()},
                    {"mla_form", to_string(p_.mla_form)},
                    {"compute_efficiency", p_.compute_efficiency},
                    {"memory_efficiency", p_.memory_efficiency},
                    {"link_efficiency", p_.link_efficiency},
                    {"phase_overhead_us", p_.phase_overhead_us},
                    {"a2a_latency_us", p_.a2a_latency_us},
                    {"a2a_network_latency_us", p_.a2a_network_latency_us},
                    {"parallel_layout", layout_json()},
                    {"ep_layout",
                     opt_.layout.moe_ep <= 1
                         ? json(nullptr)
                         : json((placement_.source == "contiguous" ? std::string("experts contiguous per rank")
                                                                   : "experts placed by " + placement_.source) +
                                (opt_.layout.moe_exchange() == MoeExchange::all_to_all
                                     ? "; sequences spread over ranks (data-parallel attention); " + flag_of("a2a") +
                                           " " + std::string(to_string(opt_.layout.a2a)) + ", dispatch rows of " +
                                           fmt::format("{:g}", dispatch_row_bytes_) + " bytes, combine rows of " +
                                           fmt::format("{:g}", combine_row_bytes_) + " bytes (payload only)"
                                     : "; every GPU computes its experts for the step's tokens (no "
                                       "all-to-all: see parallel_layout)"))},
                    {"routing", routing_source_},
                    {"routing_path", routing_path_},
                    {"ep_rank_load", rank_load_json()},
                    {"redundant_experts", redundant_json()},
                    {"expert_offload", offload_json()},
                    {"timing_source", "modeled"}};
    }

    // The layout as the sim models it: what runs on each GPU and which collectives move what (docs/sim-backend.md,
    // "Parallel layouts").
    json layout_json() const {
        const Layout& L = opt_.layout;
        const MoeExchange x = L.moe_exchange();
        json collectives = json::array();
        if (L.attn_tp > 1)
            collectives.push_back(fmt::format(
                "attn_allreduce (and dense_allreduce on dense layers): ring all-reduce "
                "over each attention TP group of {} GPUs of its replica's tokens x "
                "hidden in the activation format{}",
                L.attn_tp,
                tp_groups_span_nodes(L, hw_.gpus_per_node) ? ", over the network (the group spans nodes)" : ""));
        if (x == MoeExchange::all_to_all)
            collectives.push_back(
                "dispatch_a2a / combine_a2a: all-to-all of the rows each rank's tokens send to the "
                "ranks holding their experts (see ep_layout)");
        const std::string all_link = L.num_gpus() > hw_.gpus_per_node ? ", over the network (the GPUs span nodes)" : "";
        if (x == MoeExchange::gather && L.attn_dp > 1)
            collectives.push_back(
                fmt::format("moe_allgather: ring all-gather over the {} GPUs of the step's token "
                            "rows (dispatch format){}",
                            L.num_gpus(), all_link));
        if (x == MoeExchange::gather)
            collectives.push_back(
                L.attn_dp == 1 ? fmt::format("moe_allreduce: ring all-reduce over the {} GPUs of the experts' (and "
                                             "shared experts') partial outputs, the step's tokens x hidden{}",
                                             L.num_gpus(), all_link)
                               : fmt::format("moe_allreduce: ring reduce-scatter over the {} GPUs of the partial "
                                             "outputs{}, then a ring all-gather within each attention TP group of {}",
                                             L.num_gpus(), all_link, L.attn_tp));
        return {{"describe", L.describe()},
                {"num_gpus", L.num_gpus()},
                {"moe_exchange", to_string(x)},
                {"per_gpu", fmt::format("attention, dense layers, shared experts, embedding and LM head: 1/{} of the "
                                        "heads and widths, for 1/{} of the sequences{}",
                                        L.attn_tp, L.attn_dp, routed_experts_per_gpu(L))},
                {"collectives", collectives}};
    }

    // "; routed experts: 2 of the 8 experts, 1/1 of each one's width" (with replicas: the slots and what fills them).
    std::string routed_experts_per_gpu(const Layout& L) const {
        if (!model_.is_moe_model()) return "";
        const int64_t E = model_.moe.num_experts, R = L.redundant_experts, ep = std::max<int64_t>(L.moe_ep, 1);
        if (R == 0)
            return fmt::format("; routed experts: {} of the {} experts, 1/{} of each one's width", E / ep, E, L.moe_tp);
        return fmt::format(
            "; routed experts: {} expert slots (the {} experts and {} replicas over {} ranks), 1/{} of "
            "each one's width",
            (E + R) / ep, E, R, ep, L.moe_tp);
    }

    // Expert offload: the caches replayed over the run's routing (warm-up steps included) and how expert_fetch is
    // priced; null without offload.
    json offload_json() const {
        if (!caches_) return nullptr;
        std::vector<double> per_step(fetched_per_step_.begin(), fetched_per_step_.end());
        std::sort(per_step.begin(), per_step.end());
        const auto at = [&](double q) {
            return per_step.empty() ? 0.0 : per_step[static_cast<size_t>(q * static_cast<double>(per_step.size() - 1))];
        };
        return {{"source", "counted"},
                {"policy", opt_.layout.offload_policy},
                {"resident_experts", caches_->resident()},
                {"num_experts", model_.moe.num_experts},
                {"start",
                 "experts 0..N-1 resident in every layer (the routing is not known ahead); warm-up steps "
                 "fill the caches"},
                {"accesses", caches_->accesses()},
                {"hits", caches_->hits()},
                {"hit_rate", caches_->accesses() > 0
                                 ? static_cast<double>(caches_->hits()) / static_cast<double>(caches_->accesses())
                                 : 0.0},
                {"fetched_experts_per_step",
                 {{"steps", per_step.size()},
                  {"p50", at(0.5)},
                  {"p95", at(0.95)},
                  {"p99", at(0.99)},
                  {"max", per_step.empty() ? 0.0 : per_step.back()}}},
                {"expert_bytes", expert_bytes_},
                {"pricing", fmt::format("expert_fetch (modeled): per fetched expert {:g} bytes / ({:g} GB/s pcie_bw x "
                                        "host_link_efficiency {:g}) + host_copy_latency_us {:g}",
                                        expert_bytes_, hw_.pcie_bw_bytes_per_s / 1e9, p_.host_link_efficiency,
                                        p_.host_copy_latency_us)}};
    }

    // The replicas of each layer (--redundant-experts): [expert, rank] of every slot beyond the layer's base placement.
    json redundant_json() const {
        if (opt_.layout.redundant_experts <= 0 || placement_.by_layer.empty()) return nullptr;
        json per_layer = json::array();
        for (size_t l = 0; l < placement_.by_layer.size(); ++l) {
            const ExpertPlacement& pl = placement_.by_layer[l];
            if (pl.experts_on_rank.empty()) continue;
            json added = json::array();
            for (int64_t r = 0; r < pl.num_ranks; ++r)
                for (int32_t e : pl.experts_on_rank[static_cast<size_t>(r)])
                    if (placement_.local_index(r, e) < 0) added.push_back({e, r});
            per_layer.push_back({{"layer", l}, {"rule", pl.source}, {"replicas", added}});
        }
        return {{"count", opt_.layout.redundant_experts},
                {"rule",
                 "per layer, one replica at a time by each of moebench place's two rules ('load per copy': the "
                 "expert with the most expected load per copy onto the least-loaded rank with a free slot, "
                 "EPLB's; 'heaviest rank': one of the busiest rank's experts where it leaves that rank "
                 "lightest), keeping the one whose busiest rank expects less load"},
                {"load",
                 "the workload's expected load of the layer (docs/workloads.md), its tokens spread over the "
                 "ranks as the step's sequences are"},
                {"replicas_per_layer", per_layer}};
    }

    // Per MoE layer of the last modeled step: the assignments each rank's experts compute (replicas chosen by
    // dest_rank), as max over mean of the ranks: what sets the expert phases' slowest rank.
    json rank_load_json() const {
        const int64_t ep = opt_.layout.moe_ep;
        if (ep <= 1) return nullptr;
        json per_layer = json::array();
        double sum = 0;
        int64_t layers = 0;
        for (const Slot& sl : slots_) {
            if (sl.result.tokens_per_expert.empty()) continue;  // dense layer
            std::vector<int64_t> rows(static_cast<size_t>(ep), 0);
            for (int64_t q = 0; q < ep; ++q)
                for (int64_t i = sl.routing.rank_first[static_cast<size_t>(q)];
                     i < sl.routing.rank_first[static_cast<size_t>(q) + 1]; ++i)
                    rows[static_cast<size_t>(q)] += sl.routing.slot_rows[static_cast<size_t>(i)];
            int64_t total = 0, most = 0;
            for (int64_t x : rows) total += x, most = std::max(most, x);
            const double ratio =
                total > 0 ? static_cast<double>(most) * static_cast<double>(ep) / static_cast<double>(total) : 0.0;
            sum += ratio;
            ++layers;
            if (opt_.per_layer_detail)
                per_layer.push_back({{"layer", sl.layer}, {"assignments_per_rank", rows}, {"max_over_mean", ratio}});
        }
        json j = {{"source", routing_path_ == "statistical" ? "modeled" : "counted"},
                  {"basis",
                   "assignments the experts of each modeled rank compute in the last step (replicas chosen "
                   "as ExpertPlacement::dest_rank chooses), max over mean of the ranks"},
                  {"mean_max_over_mean", layers == 0 ? 0.0 : sum / static_cast<double>(layers)}};
        if (opt_.per_layer_detail) j[keys::kPerLayer] = per_layer;  // record brief: the mean alone
        return j;
    }

    PreparedStep prepare(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                         const RunOptions& opt, const Topology& topo = Topology{}) override {  // models every rank
        const int64_t ep = opt.layout.moe_ep, gpus = opt.layout.num_gpus();
        if (shape.batch < 1 || (shape.mode == Mode::prefill && shape.seq_len < 1) || shape.context < 0)
            config_error("batch", "the step shape is empty",
                         fmt::format("batch {}, seq_len {}", shape.batch, shape.seq_len),
                         "use batch >= 1 (and seq_len >= 1 for prefill)");
        if (ep > 1) {
            if (!model.is_moe_model())
                config_error("ep", "expert parallelism needs a MoE model", std::to_string(ep), "use ep 1");
            if ((model.moe.num_experts + opt.layout.redundant_experts) % ep != 0)
                config_error("ep",
                             fmt::format("must divide the {} experts plus {} redundant ones", model.moe.num_experts,
                                         opt.layout.redundant_experts),
                             std::to_string(ep), "use a divisor of the expert slots");
        }
        if (gpus > 1) {  // the GPUs' collectives need links: scale-up in a node, the network beyond
            const std::string key = ep > 1 ? "ep" : "tp";
            const std::string given = std::to_string(ep > 1 ? ep : opt.layout.attn_tp);
            if (gpus > hw_.gpus_per_node && hw_.network_bw_bytes_per_s <= 0)
                config_error(run_field_label("", key),
                             fmt::format("makes {} GPUs, more than a node of hardware {}, which has no "
                                         "network_bw_gbps",
                                         gpus, hw_.name),
                             given, fmt::format("use at most {} GPUs or a profile with a network", hw_.gpus_per_node));
            if (hw_.scaleup_bw_bytes_per_s <= 0 && hw_.pcie_bw_bytes_per_s <= 0)
                config_error(run_field_label("", key),
                             fmt::format("hardware {} has no scale-up or PCIe bandwidth", hw_.name), given,
                             "add scaleup_bw_gbps or pcie_bw_gbps to the profile");
        }
        // The peak of each format the step computes in; a format the profile has no peak for is refused by name.
        peaks_ = compute_peaks(hw_, opt.precision);
        peak_flops_by_format_ = json::object();
        for (const auto& [d, peak] : peaks_) peak_flops_by_format_[std::string(to_string(d))] = peak;
        PlanInput deployment;
        deployment.precision = opt.precision;
        deployment.layout = opt.layout;
        deployment.batch = shape.batch;
        deployment.context = shape.mode == Mode::prefill ? shape.seq_len : shape.context;
        memory_ = plan_memory(model, hw_, deployment);
        deployment_ = deployment;
        if (opt.soft_topn > 0)
            throw UnsupportedError(
                fmt::format("sim: {} is not modeled (the sim has no router probabilities); use the "
                            "cpu or cuda backend, or drop {}",
                            flag_of("soft_topn"), flag_of("soft_topn")));
        model_ = model;
        layers_ = layers;
        shape_ = shape;
        opt_ = opt;
        // The modeled ranks' experts (a placement file, else contiguous blocks) and the dispatch rows' bytes.
        placement_ = topo.placement ? *topo.placement
                     : ep > 1       ? contiguous_placement(model.moe.num_experts, ep)
                                    : ExpertPlacement{};
        dispatch_row_bytes_ = dispatch_row_bytes(opt.precision.dispatch, model.hidden_size);
        combine_row_bytes_ = dispatch_row_bytes(opt.precision.combine, model.hidden_size);  // the activation format
        expert_linear_.clear();
        token_side_by_class_.clear();
        routing_path_ = opt.routing_statistics ? "statistical" : "per-token";
        // Each attention replica's sequences and tokens, and one replica for each distinct count (home-side phases
        // price a class once).
        const int64_t dp = std::max<int64_t>(opt.layout.attn_dp, 1);
        rank_batch_.assign(static_cast<size_t>(dp), 0);
        rank_tokens_ = rank_batch_;
        batch_classes_.clear();
        for (int64_t r = 0; r < dp; ++r) {
            rank_batch_[static_cast<size_t>(r)] = sequences_on_rank(shape_, r, dp);
            rank_tokens_[static_cast<size_t>(r)] = tokens_on_rank(shape_, r, dp);
            if (std::none_of(batch_classes_.begin(), batch_classes_.end(), [&](int64_t c) {
                    return rank_batch_[static_cast<size_t>(c)] == rank_batch_[static_cast<size_t>(r)];
                }))
                batch_classes_.push_back(r);
        }
        PreparedStep step;
        step.mla_form = p_.mla_form;
        step.fit = modeled_fit();
        // The statistical path's routing comes with set_routing_statistics, next: no per-token state at all.
        if (opt.routing_statistics) return step;
        // Without an override the router is assumed uniform: each token picks top_k distinct experts, each equally
        // likely, drawn from the run's seed (the "uniform" workload).
        check_host_memory();
        if (model_.is_moe_model()) {
            auto wl = make_workload("uniform", model_, opt_.seed);
            default_routing_ = *wl->next_step(shape_.num_tokens(), layers_);
        } else {
            default_routing_.per_layer.assign(layers_.size(), LayerRouting{});
        }
        set_routing_override(nullptr);
        prepare_offload();
        return step;
    }

    // Expert offload: the layers' caches (online policies only: the sim sees the routing one step at a time) and the
    // host link that prices a miss.
    void prepare_offload() {
        caches_.reset();
        fetched_per_step_.clear();
        pending_fetched_ = 0;
        if (!model_.is_moe_model() || !opt_.layout.offloads(model_.moe.num_experts)) return;
        const OffloadPolicy& policy = offload_policy(opt_.layout.offload_policy, run_field_label("", "offload_policy"));
        if (policy.offline || policy.prefetches)
            config_error(run_field_label("", "offload_policy"),
                         "is not modeled by the sim, which sees the routing one step at a time", policy.name,
                         "use lru or lfu here; moebench offload " + flag_of("policy") + " " + policy.name +
                             " replays a whole trace");
        if (!(hw_.pcie_bw_bytes_per_s > 0))
            config_error(
                run_field_label("", "resident_experts"),
                fmt::format("needs the host link of hardware {} (pcie_bw_gbps) to price expert_fetch", hw_.name),
                std::to_string(opt_.layout.resident_of(model_.moe.num_experts)),
                "add pcie_bw_gbps to the profile, or drop the offload");
        expert_bytes_ = static_cast<double>(routed_expert_params(model_)) * opt_.precision.expert_weight_bytes();
        caches_ = std::make_unique<StepExpertCaches>(static_cast<int64_t>(layers_.size()), model_.moe.num_experts,
                                                     opt_.layout.resident_of(model_.moe.num_experts), policy);
        // The slots built above (the default routing) fetch nothing: every step's routing comes with
        // set_routing_override (offload takes the per-token path), which replays it through the caches.
    }

    // The statistical routing path (harness/routing_path.hpp): each MoE layer's counts and all-to-all rows drawn once
    // from the shares (SimStatisticalRouting), and repeated in every modeled step.
    void set_routing_statistics(const RoutingStatistics& stats) override {
        MOEBENCH_CHECK(opt_.routing_statistics, "sim: routing statistics for a step prepared per token");
        MOEBENCH_CHECK(stats.permutation.size() == layers_.size(), "sim: statistics for {} layers, prepared {}",
                       stats.permutation.size(), layers_.size());
        routing_source_ = stats.source.empty()
                              ? "uniform router (k distinct experts per token, seeded), drawn as statistics"
                              : stats.source;
        slots_.assign(layers_.size(), Slot{});
        std::unique_ptr<SimStatisticalRouting> draws;
        if (model_.is_moe_model())
            draws = std::make_unique<SimStatisticalRouting>(model_, shape_, opt_.layout, hw_.gpus_per_node,
                                                            stats.shares_by_rank, opt_.seed);
        for (size_t s = 0; s < layers_.size(); ++s) {
            Slot& sl = slots_[s];
            sl.layer = layers_[s];
            sl.us.fill(-1.0);
            if (!model_.is_moe_layer(sl.layer)) {
                sl.routing = SimLayerRouting{};
                sl.routing.home_rows.assign(static_cast<size_t>(opt_.layout.attn_dp), 0);
                sl.routing.no_slots(opt_.layout.moe_ep);
                sl.routing.dispatch_rows = A2aLinkBytes(opt_.layout.moe_ep);
                continue;
            }
            sl.routing = draws->draw(sl.layer, stats.permutation[s], placement_.of_layer(sl.layer));
            sl.result.tokens_per_expert = sl.routing.tokens_per_expert;
            sl.result.routing.num_tokens = shape_.num_tokens();
            sl.result.routing.k = model_.moe.top_k;
            sl.result.a2a_rows = sl.routing.cross_rank_rows;  // 0 without an all-to-all
        }
        head_us_.fill(-1.0);
        by_tokens_of_ = nullptr;  // the slots are new
    }

    // The sim keeps each MoE layer's routing (ids and weights: 8 bytes per assignment) three times: the default
    // routing, the layer's slot, and the metrics' copy of a measured step. Refused before any of it is allocated
    // when that passes 85% of MemAvailable (a batch of millions of tokens was caught only by bad_alloc, after
    // gigabytes and a minute).
    void check_host_memory() const {
        int64_t moe_layers = 0;
        for (int64_t l : layers_) moe_layers += model_.is_moe_layer(l) ? 1 : 0;
        const double bytes = 3.0 * 8.0 * static_cast<double>(moe_layers) * static_cast<double>(shape_.num_tokens()) *
                             static_cast<double>(std::max<int64_t>(model_.moe.top_k, 0));
        const double avail = static_cast<double>(mem_available_bytes());
        if (avail > 0 && bytes > 0.85 * avail)
            config_error(run_field_label("", "batch"),
                         fmt::format("needs about {:.1f} GiB of host memory for the routing of {} MoE layer(s) x {} "
                                     "tokens, more than the {:.1f} GiB available (85% of MemAvailable)",
                                     bytes / 1073741824.0, moe_layers, shape_.num_tokens(), avail / 1073741824.0),
                         std::to_string(shape_.batch),
                         fmt::format("run fewer {} or a smaller {}/{}", flag_of("layers"), flag_of("batch"),
                                     flag_of("seq_len")));
    }

    void set_routing_override(const StepRouting* routing) override {
        const StepRouting& r = routing ? *routing : default_routing_;
        routing_source_ = routing ? "workload override" : "uniform router (k distinct experts per token, seeded)";
        MOEBENCH_CHECK(r.per_layer.size() == layers_.size(), "sim: routing for {} layers, prepared {}",
                       r.per_layer.size(), layers_.size());
        slots_.assign(layers_.size(), Slot{});
        for (size_t s = 0; s < layers_.size(); ++s) build_slot(s, r.per_layer[s]);
        head_us_.fill(-1.0);
        by_tokens_of_ = nullptr;  // the slots are new
    }

    void begin_step() override {
        if (caches_) fetched_per_step_.push_back(pending_fetched_);
        pending_fetched_ = 0;
        clock_us_ = 0;
        marks_.clear();
    }

    void run_phase(Phase phase, int64_t slot) override { clock_us_ += phase_us(phase, slot); }
    void mark() override { marks_.push_back(clock_us_); }

    std::vector<double> end_step() override {
        std::vector<double> out;
        for (size_t i = 1; i < marks_.size(); ++i) out.push_back(marks_[i] - marks_[i - 1]);
        return out;
    }

    // reprice_sim: new numbers, the same prepared step; every cached price is dropped.
    void reprice(const SimParams& p) {
        for (const SimNumberField& f : sim_number_fields()) p_.*f.member = p.*f.member;
        for (Slot& sl : slots_) sl.us.fill(-1.0);
        head_us_.fill(-1.0);
        token_side_by_class_.clear();  // times, not work (expert_linear_ is work: it stays)
    }

    MoeLayerResult moe_result(int64_t slot) const override {
        MOEBENCH_CHECK(slot >= 0 && slot < static_cast<int64_t>(slots_.size()), "sim: bad layer slot {}", slot);
        return slots_[static_cast<size_t>(slot)].result;
    }

private:
    struct Slot {
        int64_t layer = 0;
        MoeLayerResult result;    // routing after capacity, counts, drops (no ids on the statistical path)
        SimLayerRouting routing;  // per rank: what the phases are priced from
        std::array<double, kNumPhases> us;
        int64_t fetched_experts = 0;  // expert offload: experts this step fetched from host memory (expert_fetch)
    };

    // A MoE layer's per-rank state from its routing (per token): each kept assignment counts at its token's rank
    // (home_rows) and at the expert slot that computes it (rank_rows, the replica ExpertPlacement::dest_rank picks),
    // and the all-to-all rows go by a2a_traffic.
    void build_slot(size_t s, const LayerRouting& given) {
        Slot& sl = slots_[s];
        sl.layer = layers_[s];
        sl.us.fill(-1.0);
        const int64_t ep = opt_.layout.moe_ep, dp = opt_.layout.attn_dp, E = model_.moe.num_experts;
        SimLayerRouting& lr = sl.routing;
        lr.home_rows.assign(static_cast<size_t>(dp), 0);
        lr.no_slots(ep);
        lr.dispatch_rows = A2aLinkBytes(ep);
        if (given.k == 0) return;  // dense layer
        const int64_t T = shape_.num_tokens();
        MOEBENCH_CHECK(given.num_tokens == T && given.ids.size() == static_cast<size_t>(T * given.k),
                       "sim: routing of layer {} has {} tokens, the step {}", sl.layer, given.num_tokens, T);
        LayerRouting r = given;
        if (r.weights.size() != r.ids.size()) r.weights.assign(r.ids.size(), 1.0f / static_cast<float>(r.k));
        for (int32_t e : r.ids)
            MOEBENCH_CHECK(e >= -1 && e < E, "sim: expert id {} outside [0, {}) in layer {}", e, E, sl.layer);
        sl.result.tokens_per_expert.assign(static_cast<size_t>(E), 0);
        const int64_t cap = core::expert_capacity(opt_.capacity_factor, T, static_cast<int>(r.k), static_cast<int>(E));
        sl.result.dropped = core::apply_capacity(r.ids.data(), r.weights.data(), T, static_cast<int>(r.k),
                                                 static_cast<int>(E), cap, sl.result.tokens_per_expert.data());
        lr.tokens_per_expert = sl.result.tokens_per_expert;
        const ExpertPlacement& pl = placement_.of_layer(sl.layer);  // with redundant experts, the layer's own
        for (int64_t q = 0; q < ep; ++q)
            lr.rank_first[static_cast<size_t>(q) + 1] =
                lr.rank_first[static_cast<size_t>(q)] +
                (ep > 1 ? static_cast<int64_t>(pl.experts_on_rank[static_cast<size_t>(q)].size()) : E);
        lr.slot_rows.assign(static_cast<size_t>(lr.rank_first.back()), 0);
        // A token's attention replica (home_rows) and, for the replica an expert copy is chosen by, its rank among
        // the expert-parallel ranks (the same rank under --ep N's all-to-all: dp = ep).
        for (int64_t t = 0; t < T; ++t) {
            const int64_t home = token_home_rank(shape_, t, dp),
                          ep_home = dp == ep ? home : token_home_rank(shape_, t, ep);
            for (int64_t j = 0; j < r.k; ++j) {
                const int32_t e = r.ids[static_cast<size_t>(t * r.k + j)];
                if (e < 0) continue;
                ++lr.home_rows[static_cast<size_t>(home)];
                const int64_t q = ep > 1 ? pl.dest_rank(e, ep_home, t) : 0;
                const int64_t slot = ep > 1 ? pl.local_index(q, e) : e;
                ++lr.slot_rows[static_cast<size_t>(lr.rank_first[static_cast<size_t>(q)] + slot)];
            }
        }
        if (opt_.layout.moe_exchange() == MoeExchange::all_to_all) {
            // The same rows each way: dispatch in the dispatch dtype, combine (transposed) in the activation dtype.
            const A2aTraffic rows = a2a_traffic(shape_, r, 1.0, pl, opt_.layout.a2a == A2aMode::dedup);
            lr.dispatch_rows = a2a_link_bytes(rows, hw_.gpus_per_node);
            lr.cross_rank_rows = rows.total();
        }
        sl.result.routing = std::move(r);
        note_fetches(sl, static_cast<int64_t>(s));
    }

    // This step's experts of a slot through its cache: what expert_fetch moves.
    void note_fetches(Slot& sl, int64_t slot) {
        sl.fetched_experts = 0;
        if (!caches_ || sl.result.tokens_per_expert.empty()) return;
        sl.fetched_experts = static_cast<int64_t>(caches_->access(slot, sl.result.routing.ids).size());
        pending_fetched_ += sl.fetched_experts;
    }

    // Slowest GPU's time for a phase that runs where the tokens live (attention side, router, permute, shared
    // expert, combine, head): each data-parallel replica runs its own sequences and the assignments of its tokens,
    // each GPU of its tensor-parallel group its share (phase_work under the layout). Replicas with the same
    // sequences and assignments do the same work: each distinct pair is modeled once.
    double home_side_us(Phase phase, int64_t layer, const std::vector<int64_t>* home_rows) const {
        // Where each replica's assignments are its tokens x k (no drops), the replicas with as many sequences are
        // alike: one per class of batch_classes_.
        const bool by_class = home_rows == nullptr || home_rows_by_tokens(*home_rows);
        const size_t n = by_class ? batch_classes_.size() : rank_batch_.size();
        std::vector<double>& rank_us = rank_us_;  // scratch: priced over a thousand times per step
        rank_us.assign(n, 0.0);
        std::vector<std::array<double, 3>>& seen = seen_;  // (sequences, assignments, us)
        seen.clear();
        for (size_t i = 0; i < n; ++i) {
            const int64_t r = by_class ? batch_classes_[i] : static_cast<int64_t>(i);
            StepShape sr = shape_;
            sr.batch = rank_batch_[static_cast<size_t>(r)];
            if (sr.batch == 0) continue;
            const int64_t rows = home_rows ? (*home_rows)[static_cast<size_t>(r)] : -1;
            const auto hit = std::find_if(seen.begin(), seen.end(), [&](const std::array<double, 3>& x) {
                return x[0] == static_cast<double>(sr.batch) && x[1] == static_cast<double>(rows);
            });
            if (hit != seen.end()) {
                rank_us[i] = (*hit)[2];
                continue;
            }
            // Home-side phases read only the total of the tokens per expert (their assignments).
            tpe_.assign(rows >= 0 ? 1 : 0, rows);
            const double us = sim_phase_us(work(phase, layer, sr, tpe_), peak_flops(phase), hw_, p_);
            seen.push_back({static_cast<double>(sr.batch), static_cast<double>(rows), us});
            rank_us[i] = us;
        }
        return across_ranks(rank_us).slowest_us;
    }

    // Whether each replica's assignments are its tokens x k (no drops): then replicas alike in sequences are alike.
    // Asked once per layer (the last answer is kept).
    bool home_rows_by_tokens(const std::vector<int64_t>& home_rows) const {
        if (&home_rows == by_tokens_of_ && home_rows.size() == rank_tokens_.size()) return by_tokens_;
        by_tokens_of_ = &home_rows;
        by_tokens_ = home_rows.size() == rank_tokens_.size();
        for (size_t r = 0; r < rank_tokens_.size() && by_tokens_; ++r)
            by_tokens_ = home_rows[r] == rank_tokens_[r] * model_.moe.top_k;
        return by_tokens_;
    }

    // Slowest rank's time for an expert phase: rank q runs its expert slots on the rows routed there, each of its
    // moe_tp GPUs a slice of every expert. The expert phases' work is linear in the rows and the experts that have
    // any (phase_work: each such expert reads its weights once, each row costs the same), so a rank is priced from
    // those two numbers, from the work of one expert with one row and with two rows; checked against phase_work once
    // per phase and layer, and where it does not hold each rank's counts go through phase_work.
    double expert_side_us(Phase phase, const Slot& sl) {
        const int64_t ep = opt_.layout.moe_ep;
        std::vector<double>& rank_us = rank_us_;
        rank_us.assign(static_cast<size_t>(ep), 0.0);
        const ExpertLinear& lin = expert_linear(phase, sl.layer);
        const double peak = peak_flops(phase);
        for (int64_t q = 0; q < ep; ++q) {
            if (!lin.linear) {
                rank_us[static_cast<size_t>(q)] =
                    sim_phase_us(work(phase, sl.layer, shape_, sl.routing.rank_rows(q)), peak, hw_, p_);
                continue;
            }
            double rows = 0, active = 0;
            for (int64_t i = sl.routing.rank_first[static_cast<size_t>(q)];
                 i < sl.routing.rank_first[static_cast<size_t>(q) + 1]; ++i) {
                const int64_t c = sl.routing.slot_rows[static_cast<size_t>(i)];
                if (c > 0) rows += static_cast<double>(c), active += 1;
            }
            PhaseWork w;
            w.flops = active * lin.per_expert.flops + rows * lin.per_row.flops;
            w.weight_bytes = active * lin.per_expert.weight_bytes + rows * lin.per_row.weight_bytes;
            w.activation_bytes = active * lin.per_expert.activation_bytes + rows * lin.per_row.activation_bytes;
            rank_us[static_cast<size_t>(q)] = sim_phase_us(w, peak, hw_, p_);
        }
        return across_ranks(rank_us).slowest_us;
    }

    struct ExpertLinear {
        bool linear = false;
        PhaseWork per_expert, per_row;
    };
    const ExpertLinear& expert_linear(Phase phase, int64_t layer) {
        const auto key = std::make_pair(static_cast<int>(phase), layer);
        auto it = expert_linear_.find(key);
        if (it != expert_linear_.end()) return it->second;
        const PhaseWork one = work(phase, layer, shape_, {1}), two = work(phase, layer, shape_, {2});
        ExpertLinear lin;
        lin.per_row = {two.flops - one.flops, two.weight_bytes - one.weight_bytes,
                       two.activation_bytes - one.activation_bytes};
        lin.per_expert = {one.flops - lin.per_row.flops, one.weight_bytes - lin.per_row.weight_bytes,
                          one.activation_bytes - lin.per_row.activation_bytes};
        const PhaseWork check = work(phase, layer, shape_, {3, 0, 5});  // 2 experts, 8 rows
        const auto near = [](double got, double want) {
            return std::abs(got - want) <= 1e-9 * std::max(1.0, std::abs(want));
        };
        lin.linear =
            near(check.flops, 2 * lin.per_expert.flops + 8 * lin.per_row.flops) &&
            near(check.weight_bytes, 2 * lin.per_expert.weight_bytes + 8 * lin.per_row.weight_bytes) &&
            near(check.activation_bytes, 2 * lin.per_expert.activation_bytes + 8 * lin.per_row.activation_bytes);
        return expert_linear_.emplace(key, lin).first->second;
    }

    PhaseWork work(Phase phase, int64_t layer, const StepShape& s, const std::vector<int64_t>& tpe) const {
        PhaseWorkOptions o;
        o.mla_form = p_.mla_form;
        o.layout = &opt_.layout;
        return phase_work(model_, phase, layer, s, tpe, opt_.precision, opt_.layout.moe_ep, o);
    }

    // The peak rate a phase's matrix products run at: the format of their operands (the phase table's matmul).
    double peak_flops(Phase phase) const { return peaks_.at(matmul_dtype(phase, opt_.precision)); }

    // A link-bound phase from its traffic: dispatch sends the slot's rows, combine returns them (the transpose); the
    // collectives of tensor parallelism as rings over their groups (sim_collective_us), the largest replica's tokens.
    double link_us(Phase phase, const Slot& sl) const {
        if (phase == Phase::expert_fetch) {  // the missed experts over the host link, one copy each
            if (sl.fetched_experts == 0) return 0.0;
            return static_cast<double>(sl.fetched_experts) *
                   (expert_bytes_ / (hw_.pcie_bw_bytes_per_s * p_.host_link_efficiency) * 1e6 +
                    p_.host_copy_latency_us);
        }
        if (phase == Phase::dispatch_a2a)
            return sim_a2a_us(sl.routing.dispatch_rows.scaled(dispatch_row_bytes_), hw_, p_);
        if (phase == Phase::combine_a2a)
            return sim_a2a_us(sl.routing.dispatch_rows.transposed().scaled(combine_row_bytes_), hw_, p_);
        const Layout& L = opt_.layout;
        const double T = static_cast<double>(shape_.num_tokens()), H = static_cast<double>(model_.hidden_size);
        int64_t replica_tokens = 0;  // the largest data-parallel replica's tokens
        for (int64_t d = 0; d < L.attn_dp; ++d)
            replica_tokens = std::max(replica_tokens, tokens_on_rank(shape_, d, L.attn_dp));
        const double a = opt_.precision.act_bytes(), combine = dtype_info(opt_.precision.combine).bytes_per_elem();
        const double replica_rows = static_cast<double>(replica_tokens) * H;
        const bool tp_spans = tp_groups_span_nodes(L, hw_.gpus_per_node), all_span = L.num_gpus() > hw_.gpus_per_node;
        switch (phase) {
            case Phase::attn_allreduce:
            case Phase::dense_allreduce:
                return sim_collective_us(Collective::all_reduce, L.attn_tp, replica_rows * a, tp_spans, hw_, p_);
            case Phase::moe_allgather:
                return sim_collective_us(Collective::all_gather, L.num_gpus(), T * dispatch_row_bytes_, all_span, hw_,
                                         p_);
            case Phase::moe_allreduce:
                if (L.attn_dp == 1)  // one TP group: the partial outputs summed on every GPU
                    return sim_collective_us(Collective::all_reduce, L.num_gpus(), T * H * combine, all_span, hw_, p_);
                // Summed and scattered to the replicas' GPUs, then gathered within each replica's TP group.
                return sim_collective_us(Collective::reduce_scatter, L.num_gpus(), T * H * combine, all_span, hw_, p_) +
                       sim_collective_us(Collective::all_gather, L.attn_tp, replica_rows * combine, tp_spans, hw_, p_);
            default: break;
        }
        throw UnsupportedError(
            fmt::format("sim: phase {} is bound by a link the sim has no traffic model for yet", phase_name(phase)));
    }

    double phase_us(Phase phase, int64_t slot) {
        const int idx = static_cast<int>(phase);
        if (slot < 0) {
            if (head_us_[idx] < 0) head_us_[idx] = home_side_us(phase, -1, nullptr);
            return head_us_[idx];
        }
        MOEBENCH_CHECK(slot < static_cast<int64_t>(slots_.size()), "sim: bad layer slot {}", slot);
        Slot& sl = slots_[static_cast<size_t>(slot)];
        if (sl.us[idx] >= 0) return sl.us[idx];
        // The phase table says what bounds it and where it runs.
        const PhaseInfo& row = phase_info(phase);
        double us = 0;
        if (row.bound != PhaseBound::device)
            us = link_us(phase, sl);
        else if (row.side == PhaseSide::experts)
            us = expert_side_us(phase, sl);
        else
            us = token_side_us(phase, sl);
        sl.us[idx] = us;
        return us;
    }

    // A token-side phase of a layer. Where each replica's assignments are its tokens x k (no drops), its time is the
    // same on alike layers (layer_work_class): priced once per class.
    double token_side_us(Phase phase, const Slot& sl) {
        const std::vector<int64_t>* home = sl.result.tokens_per_expert.empty() ? nullptr : &sl.routing.home_rows;
        if (home != nullptr && !home_rows_by_tokens(*home)) return home_side_us(phase, sl.layer, home);
        const auto key = std::make_pair(static_cast<int>(phase), layer_work_class(model_, sl.layer));
        auto it = token_side_by_class_.find(key);
        if (it == token_side_by_class_.end())
            it = token_side_by_class_.emplace(key, home_side_us(phase, sl.layer, home)).first;
        return it->second;
    }

    HardwareProfile hw_;
    SimParams p_;
    ModelConfig model_;
    std::vector<int64_t> layers_;
    StepShape shape_;
    RunOptions opt_;
    StepRouting default_routing_;
    std::string routing_source_;
    std::vector<Slot> slots_;
    ExpertPlacement placement_;
    double dispatch_row_bytes_ = 0;
    double combine_row_bytes_ = 0;
    std::map<DType, double> peaks_;  // FLOP/s of each format the step computes in
    json peak_flops_by_format_;      // the same, by name, for the report
    MemoryPlan memory_;              // per GPU, as moebench plan counts it
    PlanInput deployment_;           // what memory_ counts: the formats, layout, batch and context of the step
    std::array<double, kNumPhases> head_us_{};
    std::map<std::pair<int, int64_t>, ExpertLinear> expert_linear_;  // (phase, layer)
    std::map<std::pair<int, int64_t>, double> token_side_by_class_;  // (phase, layer_work_class): token-side times
    std::string routing_path_ = "per-token";
    std::vector<int64_t> rank_batch_;                             // [attention replica]: its sequences
    std::vector<int64_t> rank_tokens_;                            // [attention replica]: its tokens
    std::vector<int64_t> batch_classes_;                          // one replica per distinct count of sequences
    mutable std::vector<double> rank_us_;                         // scratch of the pricing
    mutable std::vector<std::array<double, 3>> seen_;             // scratch of home_side_us
    mutable std::vector<int64_t> tpe_;                            // scratch of home_side_us
    mutable const std::vector<int64_t>* by_tokens_of_ = nullptr;  // home_rows_by_tokens' last question and answer
    mutable bool by_tokens_ = false;
    double clock_us_ = 0;
    std::vector<double> marks_;
    std::unique_ptr<StepExpertCaches> caches_;  // expert offload: one cache per layer slot (null: none)
    double expert_bytes_ = 0;                   // one routed expert's weights in the expert format
    int64_t pending_fetched_ = 0;               // fetched since the last step began (the next step's routing)
    std::vector<int64_t> fetched_per_step_;     // experts fetched in each step, warm-up included
};

}  // namespace

namespace {

// The profile's `sim` object as one table, of the same kind as the profile's own (config/hardware_fields.cpp): key,
// accepted values, default (SimParams' initializer), meaning, and the member it fills. The reader, its unknown-key
// list and docs/sim-backend.md's parameter table come from it.
// The accepted ranges of the two kinds of number: the reader, the docs' table and what calibration may fit.
constexpr double kFractionMin = 0.01, kFractionMax = 1.0, kMicrosecondsMax = 1e6;

enum class SimFieldKind {
    fraction,      // of a datasheet figure, in [0.01, 1]: below 1% no real kernel runs (1e-300 would model centuries)
    microseconds,  // a fixed cost in [0, 1e6] us: above a second per operation is a typo
    choice,        // one of a few names
};

struct SimField {
    const char* key;
    SimFieldKind kind;
    double SimParams::*number;                    // fraction, microseconds
    std::vector<std::string> choices;             // choice
    void (*set)(SimParams&, const std::string&);  // choice: the member from one of `choices`
    std::string (*get)(const SimParams&);         // choice: the member's name
    const char* meaning;
};

const std::vector<SimField> kSimFields = {
    {"compute_efficiency",
     SimFieldKind::fraction,
     &SimParams::compute_efficiency,
     {},
     nullptr,
     nullptr,
     "fraction of the dense tensor-core peak a GEMM phase reaches (large cuBLAS bf16 GEMMs on Hopper typically land "
     "at 70-80% of the dense peak; small ones less)"},
    {"memory_efficiency",
     SimFieldKind::fraction,
     &SimParams::memory_efficiency,
     {},
     nullptr,
     nullptr,
     "fraction of the HBM bandwidth a streaming phase reaches (device copy kernels typically reach 85-90% of the "
     "datasheet figure)"},
    {"link_efficiency",
     SimFieldKind::fraction,
     &SimParams::link_efficiency,
     {},
     nullptr,
     nullptr,
     "fraction of the per-direction link bandwidth an all-to-all reaches"},
    {"phase_overhead_us",
     SimFieldKind::microseconds,
     &SimParams::phase_overhead_us,
     {},
     nullptr,
     nullptr,
     "per phase: kernel launch and tail, added to the roofline time"},
    {"a2a_latency_us",
     SimFieldKind::microseconds,
     &SimParams::a2a_latency_us,
     {},
     nullptr,
     nullptr,
     "fixed cost of one all-to-all inside a node"},
    {"a2a_network_latency_us",
     SimFieldKind::microseconds,
     &SimParams::a2a_network_latency_us,
     {},
     nullptr,
     nullptr,
     "fixed cost of one all-to-all whose ranks span nodes"},
    {"host_link_efficiency",
     SimFieldKind::fraction,
     &SimParams::host_link_efficiency,
     {},
     nullptr,
     nullptr,
     "fraction of the profile's pcie_bw_gbps a copy of pinned host memory to the GPU reaches (expert_fetch); default "
     "0.78: 24.8 GB/s measured by nvbandwidth on a 32 GB/s PCIe 4.0 x16 A100 link (NVIDIA developer forum, "
     "docs/offload.md)"},
    {"host_copy_latency_us",
     SimFieldKind::microseconds,
     &SimParams::host_copy_latency_us,
     {},
     nullptr,
     nullptr,
     "fixed cost of one copy from host memory (one fetched expert: launch and synchronisation); 10 us is an "
     "assumption, not a measurement"},
    {"dtype",
     SimFieldKind::choice,
     nullptr,
     {"bf16", "fp32"},
     [](SimParams& p, const std::string& v) { p.dtype = *dtype_named(v); },
     [](const SimParams& p) { return std::string(to_string(p.dtype)); },
     "bf16: 2-byte weights and activations, bf16 peak; fp32: 4 bytes, fp32 peak (the cpu backend's precision)"},
    {"mla_form",
     SimFieldKind::choice,
     nullptr,
     {"absorbed", "latent_expand", "expanded_cache"},
     [](SimParams& p, const std::string& v) {
         p.mla_form = v == "absorbed"        ? MlaForm::absorbed
                      : v == "latent_expand" ? MlaForm::latent_expand
                                             : MlaForm::expanded_cache;
     },
     [](const SimParams& p) { return std::string(to_string(p.mla_form)); },
     "how MLA attention is counted (docs/sim-backend.md, \"MLA\"); absorbed is how the cuda backend runs decode"},
};

std::string joined(const std::vector<std::string>& v, const std::string& sep, const std::string& last) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? last : sep) + v[i];
    return s;
}

std::string accepted_text(const SimField& f) {
    switch (f.kind) {
        case SimFieldKind::fraction: return "0.01 to 1";        // kFractionMin, kFractionMax
        case SimFieldKind::microseconds: return "0 to 1e6 us";  // kMicrosecondsMax
        case SimFieldKind::choice: return joined(f.choices, ", ", ", ");
    }
    return "";
}

std::string default_text(const SimField& f) {
    const SimParams d;
    return f.kind == SimFieldKind::choice ? f.get(d) : fmt::format("{:g}", d.*f.number);
}

void read_sim_field(const JsonReader& r, const SimField& f, SimParams& p) {
    if (!r.has(f.key)) return;
    const std::string key = f.key;
    if (f.kind == SimFieldKind::choice) {
        const std::string v = r.req_string(key);
        if (std::find(f.choices.begin(), f.choices.end(), v) == f.choices.end())
            config_error(r.field(key), "is not one of " + joined(f.choices, ", ", " or "), v,
                         "use " + joined(f.choices, ", ", " or "));
        f.set(p, v);
        return;
    }
    const double v = r.req_double(key);
    if (f.kind == SimFieldKind::fraction && (!std::isfinite(v) || v < kFractionMin || v > kFractionMax))
        config_error(r.field(key), "must be a fraction in [0.01, 1]", json_brief(r.raw().at(key)),
                     "use e.g. 0.8 for 80% of the datasheet figure");
    if (f.kind == SimFieldKind::microseconds && (!std::isfinite(v) || v < 0 || v > kMicrosecondsMax))
        config_error(r.field(key), "must be between 0 and 1e6 microseconds", json_brief(r.raw().at(key)),
                     "give the fixed cost of the operation in microseconds (launch latencies are 1-50)");
    p.*f.number = v;
}

}  // namespace

SimParams sim_params_from_json(const json& sim, const std::string& path) {
    if (!sim.is_object()) config_error(path, "must be an object", json_brief(sim), "see docs/sim-backend.md");
    JsonReader r(sim, path);
    std::vector<std::string> keys;
    for (const SimField& f : kSimFields) keys.emplace_back(f.key);
    for (const auto& [key, value] : sim.items())
        if (std::find(keys.begin(), keys.end(), key) == keys.end())
            config_error(r.field(key), "unknown sim field", key,
                         did_you_mean(key, keys, "use " + joined(keys, ", ", " or ")));
    SimParams p;
    for (const SimField& f : kSimFields) read_sim_field(r, f, p);
    return p;
}

std::string sim_fields_table(const std::string& format) {
    if (format == "json") {
        json a = json::array();
        for (const SimField& f : kSimFields)
            a.push_back(
                {{"key", f.key}, {"default", default_text(f)}, {"accepted", accepted_text(f)}, {"meaning", f.meaning}});
        return a.dump(2) + "\n";
    }
    std::string out;
    if (format == "md") {
        out = "| key | default | accepted | meaning |\n| --- | --- | --- | --- |\n";
        for (const SimField& f : kSimFields)
            out += fmt::format("| `{}` | {} | {} | {} |\n", f.key, default_text(f), accepted_text(f), f.meaning);
        return out;
    }
    size_t wk = 3, wd = 7, wa = 8;
    for (const SimField& f : kSimFields) {
        wk = std::max(wk, std::string(f.key).size());
        wd = std::max(wd, default_text(f).size());
        wa = std::max(wa, accepted_text(f).size());
    }
    out = fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", "key", wk, "default", wd, "accepted", wa, "meaning");
    for (const SimField& f : kSimFields)
        out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", f.key, wk, default_text(f), wd, accepted_text(f), wa,
                           f.meaning);
    return out;
}

SimParams sim_params_for(const HardwareProfile& hw) {
    std::error_code ec;
    if (hw.source.empty() || !std::filesystem::is_regular_file(hw.source, ec)) return SimParams{};
    static FileMemo<SimParams> memo;  // read once while unchanged (a sweep makes a backend for every point)
    return memo.get(hw.source, [&] {
        json j = load_json_file(hw.source, kMaxConfigBytes);
        if (!j.is_object() || !j.contains("sim") || j.at("sim").is_null()) return SimParams{};
        return sim_params_from_json(j.at("sim"), hw.source + ": sim");
    });
}

json sim_params_to_json(const SimParams& p) {
    json j = json::object();
    for (const SimField& f : kSimFields) j[f.key] = f.kind == SimFieldKind::choice ? json(f.get(p)) : json(p.*f.number);
    return j;
}

std::vector<SimNumberField> sim_number_fields() {
    std::vector<SimNumberField> out;
    for (const SimField& f : kSimFields) {
        if (f.kind == SimFieldKind::fraction) out.push_back({f.key, f.number, kFractionMin, kFractionMax});
        if (f.kind == SimFieldKind::microseconds) out.push_back({f.key, f.number, 0.0, kMicrosecondsMax});
    }
    return out;
}

void reprice_sim(Backend& backend, const SimParams& p) {
    auto* sim = dynamic_cast<SimBackend*>(&backend);
    MOEBENCH_CHECK(sim != nullptr, "reprice_sim: backend {} is not the sim", backend.traits().name);
    sim->reprice(p);
}

double sim_peak_flops(const HardwareProfile& hw, const SimParams& p) {
    return peak_flops_for(hw, p.dtype, "sim.dtype");
}

double sim_phase_us(const PhaseWork& w, double peak_flops, const HardwareProfile& hw, const SimParams& p) {
    const double compute_s = w.flops / (peak_flops * p.compute_efficiency);
    const double memory_s = w.bytes() / (hw.memory_bw_bytes_per_s * p.memory_efficiency);
    return std::max(compute_s, memory_s) * 1e6 + p.phase_overhead_us;
}

A2aLinkBytes a2a_link_bytes(const A2aTraffic& t, int64_t gpus_per_node) {
    const int64_t R = t.num_ranks, node = std::max<int64_t>(gpus_per_node, 1);
    A2aLinkBytes l(R);
    for (int64_t r = 0; r < R; ++r)
        for (int64_t o = 0; o < R; ++o) {
            if (o == r) continue;
            const bool same_node = o / node == r / node;
            (same_node ? l.intra_out : l.inter_out)[static_cast<size_t>(r)] += t.at(r, o);
            (same_node ? l.intra_in : l.inter_in)[static_cast<size_t>(r)] += t.at(o, r);
        }
    return l;
}

A2aLinkBytes A2aLinkBytes::transposed() const {
    A2aLinkBytes l = *this;
    std::swap(l.intra_out, l.intra_in);
    std::swap(l.inter_out, l.inter_in);
    return l;
}

A2aLinkBytes A2aLinkBytes::scaled(double f) const {
    A2aLinkBytes l = *this;
    for (auto* v : {&l.intra_out, &l.intra_in, &l.inter_out, &l.inter_in})
        for (double& x : *v) x *= f;
    return l;
}

double sim_a2a_us(const A2aLinkBytes& l, const HardwareProfile& hw, const SimParams& p) {
    const int64_t node = std::max<int64_t>(hw.gpus_per_node, 1);
    const double intra_bw =
        (hw.scaleup_bw_bytes_per_s > 0 ? hw.scaleup_bw_bytes_per_s : hw.pcie_bw_bytes_per_s) * p.link_efficiency;
    const double inter_bw = hw.network_bw_bytes_per_s * p.link_efficiency;
    // Each direction of each link carries its own bytes: sending and receiving bound a rank separately, and the
    // scale-up links and the network work side by side, so the slowest rank's time is the largest of the four kinds'
    // largest entries, each over its link.
    const auto largest = [](const std::vector<double>& v) {
        return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
    };
    const double intra = std::max(largest(l.intra_out), largest(l.intra_in));
    const double inter = std::max(largest(l.inter_out), largest(l.inter_in));
    double worst_s = 0;
    if (intra > 0) worst_s = intra / intra_bw;
    if (inter > 0) worst_s = std::max(worst_s, inter / inter_bw);
    // A collective whose ranks span nodes pays the network latency even where few rows leave the node.
    const bool crosses_nodes = l.num_ranks > node;
    return worst_s * 1e6 + (crosses_nodes ? p.a2a_network_latency_us : p.a2a_latency_us);
}

bool tp_groups_span_nodes(const Layout& l, int64_t gpus_per_node) {
    const int64_t node = std::max<int64_t>(gpus_per_node, 1);
    for (int64_t d = 0; d < l.attn_dp; ++d) {
        const int64_t first = d * l.attn_tp, last = first + l.attn_tp - 1;
        if (first / node != last / node) return true;
    }
    return false;
}

double sim_collective_us(Collective c, int64_t n, double buffer_bytes, bool spans_nodes, const HardwareProfile& hw,
                         const SimParams& p) {
    if (n <= 1) return 0.0;
    const double link_bw = spans_nodes
                               ? hw.network_bw_bytes_per_s
                               : (hw.scaleup_bw_bytes_per_s > 0 ? hw.scaleup_bw_bytes_per_s : hw.pcie_bw_bytes_per_s);
    const double bytes = ring_bytes_per_gpu(c, n, buffer_bytes);
    return bytes / (link_bw * p.link_efficiency) * 1e6 + (spans_nodes ? p.a2a_network_latency_us : p.a2a_latency_us);
}

double sim_a2a_us(const A2aTraffic& t, const HardwareProfile& hw, const SimParams& p, bool transpose) {
    const A2aLinkBytes l = a2a_link_bytes(t, hw.gpus_per_node);
    return sim_a2a_us(transpose ? l.transposed() : l, hw, p);
}

BackendTraits sim_backend_traits(const HardwareProfile& hw, const SimParams& p) {
    BackendTraits t;
    t.name = "sim";
    t.measures = false;
    t.capabilities = {Capability::ep_modeled_ranks};  // no weights, no data: no tensors to hand out
    t.linear_attention = true;
    t.attention_output_gate = true;
    t.native_precision = uniform_precision(p.dtype);  // the profile's sim.dtype: bf16 unless it says fp32
    t.weight_dtypes.clear();
    for (const DTypeInfo& i : dtype_table())
        if (i.weights) t.weight_dtypes.push_back(i.dtype);
    t.kv_dtypes = {DType::fp32, DType::bf16, DType::fp8};
    t.dispatch_dtypes = {DType::fp32, DType::bf16, DType::fp8};
    t.tensor_parallel = true;
    t.routing_statistics = true;  // the statistical routing path (harness/routing_path.hpp)
    t.default_hardware = hw.name;
    return t;
}

std::unique_ptr<Backend> make_sim_backend(const HardwareProfile& hw) {
    return make_sim_backend(hw, sim_params_for(hw));
}

std::unique_ptr<Backend> make_sim_backend(const HardwareProfile& hw, const SimParams& p) {
    if (hw.memory_bw_bytes_per_s <= 0 || sim_peak_flops(hw, p) <= 0)
        config_error("hardware", "the sim needs memory_bw_gbps and a peak FLOP rate", hw.name,
                     "use a profile from configs/hardware/");
    return std::make_unique<SimBackend>(hw, p);
}

}  // namespace moebench
