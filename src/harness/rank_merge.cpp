// SPDX-License-Identifier: Apache-2.0
#include "harness/rank_merge.hpp"

#include "comm/communicator.hpp"
#include "common/error.hpp"
#include "core/phase.hpp"
#include "metrics/rank_times.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace moebench {

namespace {

json traffic_json(const RankTraffic& t) {
    return {{"dp", t.dispatch_payload_bytes}, {"dm", t.dispatch_meta_bytes}, {"cp", t.combine_payload_bytes},
            {"dr", t.dispatch_rows},          {"rr", t.rows_received},       {"er", t.expert_rows},
            {"dx", t.dispatch_exchange_us},   {"cx", t.combine_exchange_us}, {"dw", t.dispatch_wait_us},
            {"cw", t.combine_wait_us}};
}

RankTraffic traffic_from(const json& j) {
    RankTraffic t;
    t.dispatch_payload_bytes = j.at("dp").get<std::vector<double>>();
    t.dispatch_meta_bytes = j.at("dm").get<std::vector<double>>();
    t.combine_payload_bytes = j.at("cp").get<std::vector<double>>();
    t.dispatch_rows = j.at("dr").get<std::vector<int64_t>>();
    t.rows_received = j.at("rr").get<int64_t>();
    t.expert_rows = j.at("er").get<int64_t>();
    t.dispatch_exchange_us = j.at("dx").get<double>();
    t.combine_exchange_us = j.at("cx").get<double>();
    t.dispatch_wait_us = j.at("dw").get<double>();
    t.combine_wait_us = j.at("cw").get<double>();
    return t;
}

std::string to_wire(const RankMeasurement& m) {
    json steps = json::array();
    for (const StepTimes& s : m.steps) steps.push_back({{"p", s.phase_us}, {"w", s.wall_us}, {"s", s.start_us}});
    json moe = json::array();
    for (const MoeLayerSamples& a : m.moe)
        moe.push_back({{"slot", a.slot},
                       {"layer", a.layer},
                       {"k", a.k},
                       {"ids", a.ids},
                       {"logits", a.logits},
                       {"lt", a.logit_tokens},
                       {"gemm", a.expert_gemm_us},
                       {"gs", a.gemm_steps},
                       {"drop", a.backend_dropped},
                       {"tr", traffic_json(a.traffic)},
                       {"ts", a.traffic_steps}});
    const json j = {{"rank", m.rank},       {"host", m.host}, {"tokens", m.tokens},
                    {"experts", m.experts}, {"steps", steps}, {"moe", moe}};
    return j.dump();
}

RankMeasurement from_wire(const std::string& s) {
    const json j = json::parse(s);
    RankMeasurement m;
    m.rank = j.at("rank").get<int64_t>();
    m.host = j.at("host").get<std::string>();
    m.tokens = j.at("tokens").get<int64_t>();
    m.experts = j.at("experts").get<std::vector<int32_t>>();
    for (const json& st : j.at("steps"))
        m.steps.push_back({st.at("p").get<std::vector<double>>(), st.at("w").get<double>(), st.at("s").get<double>()});
    for (const json& a : j.at("moe")) {
        MoeLayerSamples s;
        s.slot = a.at("slot").get<int64_t>();
        s.layer = a.at("layer").get<int64_t>();
        s.k = a.at("k").get<int64_t>();
        s.ids = a.at("ids").get<std::vector<int32_t>>();
        s.logits = a.at("logits").get<std::vector<float>>();
        s.logit_tokens = a.at("lt").get<int64_t>();
        s.expert_gemm_us = a.at("gemm").get<std::vector<double>>();
        s.gemm_steps = a.at("gs").get<int64_t>();
        s.backend_dropped = a.at("drop").get<int64_t>();
        s.traffic = traffic_from(a.at("tr"));
        s.traffic_steps = a.at("ts").get<int64_t>();
        m.moe.push_back(std::move(s));
    }
    return m;
}

// Layer `a` of every rank as one: the ranks' tokens of each step in rank order (the whole step's token order).
MoeLayerSamples merge_layer(const std::vector<RankMeasurement>& ranks, size_t a, int64_t num_steps) {
    MoeLayerSamples out = ranks.front().moe[a];
    out.ids.clear();
    out.logits.clear();
    out.logit_tokens = 0;
    out.backend_dropped = 0;
    std::fill(out.expert_gemm_us.begin(), out.expert_gemm_us.end(), 0.0);
    const int64_t k = out.k;
    int64_t logit_steps = num_steps;  // steps whose logits every rank kept
    for (const RankMeasurement& r : ranks)
        logit_steps = std::min(logit_steps, r.tokens > 0 ? r.moe[a].logit_tokens / r.tokens : 0);
    const int64_t E = logit_steps > 0 && ranks.front().tokens > 0
                          ? static_cast<int64_t>(ranks.front().moe[a].logits.size()) / ranks.front().moe[a].logit_tokens
                          : 0;
    for (int64_t s = 0; s < num_steps; ++s)
        for (const RankMeasurement& r : ranks) {
            const MoeLayerSamples& m = r.moe[a];
            const auto from = m.ids.begin() + s * r.tokens * k;
            out.ids.insert(out.ids.end(), from, from + r.tokens * k);
            if (s < logit_steps) {
                const auto lf = m.logits.begin() + s * r.tokens * E;
                out.logits.insert(out.logits.end(), lf, lf + r.tokens * E);
                out.logit_tokens += r.tokens;
            }
        }
    for (const RankMeasurement& r : ranks) {
        const MoeLayerSamples& m = r.moe[a];
        out.backend_dropped += m.backend_dropped;
        if (out.expert_gemm_us.size() < m.expert_gemm_us.size())
            out.expert_gemm_us.resize(m.expert_gemm_us.size(), 0.0);
        for (size_t e = 0; e < m.expert_gemm_us.size(); ++e) out.expert_gemm_us[e] += m.expert_gemm_us[e];
    }
    return out;
}

double mean(const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// A rank's mean time per step of each phase, summed over the layers run.
std::map<Phase, double> phase_means(const RankMeasurement& r, const std::vector<PhaseEntry>& plan) {
    std::map<Phase, double> out;
    for (const StepTimes& s : r.steps)
        for (size_t i = 0; i < plan.size() && i < s.phase_us.size(); ++i) out[plan[i].phase] += s.phase_us[i];
    for (auto& [p, us] : out) us /= static_cast<double>(std::max<size_t>(1, r.steps.size()));
    return out;
}

json spread_json(const std::vector<double>& per_rank) {
    const RankSpread s = across_ranks(per_rank);
    return {{"slowest_rank", s.slowest_rank},
            {"max", s.slowest_us},
            {"min", s.fastest_us},
            {"mean", s.mean_us},
            {"max_over_mean", s.imbalance()}};
}

// The last measured step as each rank recorded it: its phases at their start times (host steady clock, relative to
// the earliest rank's start of that step). Ranks on one host share the clock; across hosts the offsets are unknown.
json timeline_json(const MergedRanks& m, const std::vector<PhaseEntry>& plan) {
    const size_t last = m.ranks.front().steps.size() - 1;
    double t0 = m.ranks.front().steps[last].start_us;
    for (const RankMeasurement& r : m.ranks) t0 = std::min(t0, r.steps[last].start_us);
    std::set<std::string> hosts;
    json ranks = json::array();
    for (const RankMeasurement& r : m.ranks) {
        hosts.insert(r.host);
        const StepTimes& s = r.steps[last];
        json phases = json::array();
        double ts = s.start_us - t0;
        for (size_t i = 0; i < plan.size() && i < s.phase_us.size(); ++i) {
            phases.push_back({std::string(phase_name(plan[i].phase)), plan[i].layer, ts, s.phase_us[i]});
            ts += s.phase_us[i];
        }
        ranks.push_back({{"rank", r.rank}, {"host", r.host}, {"phases", phases}});
    }
    return {
        {"source", "measured"},
        {"step", last},
        {"columns", {"phase", "layer", "start_us", "dur_us"}},
        {"basis", hosts.size() == 1
                      ? "the last measured step on each rank: phase start times on the host's steady clock (shared "
                        "by the ranks of one host), relative to the first rank to start the step"
                      : "the last measured step on each rank: phase start times on each host's steady clock; hosts' "
                        "clocks are not aligned, so ranks on different hosts are offset by an unknown amount"},
        {"ranks", ranks}};
}

}  // namespace

MergedRanks gather_ranks(Communicator& comm, const RankMeasurement& mine) {
    const std::vector<std::string> all = comm.gather(to_wire(mine), 0);
    MergedRanks m;
    if (comm.rank() != 0) return m;
    for (const std::string& s : all) m.ranks.push_back(from_wire(s));
    const size_t num_steps = m.ranks.front().steps.size();
    for (const RankMeasurement& r : m.ranks)
        MOEBENCH_CHECK(r.steps.size() == num_steps && r.moe.size() == m.ranks.front().moe.size(),
                       "rank {} measured {} steps of {} MoE layers, rank 0 {} of {}", r.rank, r.steps.size(),
                       r.moe.size(), num_steps, m.ranks.front().moe.size());
    for (size_t s = 0; s < num_steps; ++s) {
        StepTimes t = m.ranks.front().steps[s];
        for (const RankMeasurement& r : m.ranks) {
            for (size_t i = 0; i < t.phase_us.size(); ++i)
                t.phase_us[i] = std::max(t.phase_us[i], r.steps[s].phase_us[i]);
            t.wall_us = std::max(t.wall_us, r.steps[s].wall_us);
        }
        m.steps.push_back(std::move(t));
    }
    for (size_t a = 0; a < m.ranks.front().moe.size(); ++a)
        m.moe.push_back(merge_layer(m.ranks, a, static_cast<int64_t>(num_steps)));
    return m;
}

json ranks_block(const MergedRanks& m, const std::vector<PhaseEntry>& plan, const Communicator& comm,
                 const RunOptions& opt, const std::string& placement_source) {
    const size_t N = m.ranks.size();
    std::vector<std::map<Phase, double>> means;
    for (const RankMeasurement& r : m.ranks) means.push_back(phase_means(r, plan));
    json per_rank = json::array();
    std::vector<double> tokens, expert_rows, rows_received, step_us;
    for (size_t i = 0; i < N; ++i) {
        const RankMeasurement& r = m.ranks[i];
        double er = 0, rr = 0;
        for (const MoeLayerSamples& a : r.moe)
            if (a.traffic_steps > 0) {
                er += static_cast<double>(a.traffic.expert_rows) / static_cast<double>(a.traffic_steps);
                rr += static_cast<double>(a.traffic.rows_received) / static_cast<double>(a.traffic_steps);
            }
        std::vector<double> walls;
        for (const StepTimes& s : r.steps) walls.push_back(s.wall_us);
        json phases = json::object();
        for (const auto& [p, us] : means[i]) phases[std::string(phase_name(p))] = us;
        per_rank.push_back({{"rank", r.rank},
                            {"host", r.host},
                            {"tokens", r.tokens},
                            {"experts", r.experts},
                            {"num_experts", r.experts.size()},
                            {"expert_rows_per_step", er},
                            {"rows_received_per_step", rr},
                            {"step_mean_us", mean(walls)},
                            {"phase_mean_us", phases}});
        tokens.push_back(static_cast<double>(r.tokens));
        expert_rows.push_back(er);
        rows_received.push_back(rr);
        step_us.push_back(mean(walls));
    }
    json phases = json::object();
    for (const auto& [p, us0] : means.front()) {
        std::vector<double> per(N, 0.0);
        for (size_t i = 0; i < N; ++i) per[i] = means[i].count(p) ? means[i].at(p) : 0.0;
        phases[std::string(phase_name(p))] = spread_json(per);
    }
    return {{"source", "measured"},
            {"num_ranks", N},
            {"communicator", comm.name()},
            {"library", comm.library()},
            {"a2a", to_string(opt.layout.a2a)},
            {"dispatch_dtype", to_string(opt.precision.dispatch)},
            {"placement", placement_source},
            {"basis",
             "each rank runs its own sequences (data-parallel attention) and the experts the placement gives it; "
             "the report's latency takes, per step and phase, the slowest rank's time (the ranks wait for each "
             "other at the all-to-alls); phase times here are means per step, summed over the layers run"},
            {"per_rank", per_rank},
            {"phase_spread_us", phases},
            {"step_spread_us", spread_json(step_us)},
            {"timeline", timeline_json(m, plan)},
            {"load",
             {{"basis",
               "rank-level load, beside the expert-level load of expert_load: (row, expert) products each "
               "rank's experts computed per step, dispatch rows it received, tokens it owns"},
              {"expert_rows", spread_json(expert_rows)},
              {"rows_received", spread_json(rows_received)},
              {"tokens", spread_json(tokens)}}}};
}

json traffic_block(const MergedRanks& m, const std::vector<std::string>& hosts) {
    const size_t N = m.ranks.size();
    using Matrix = std::vector<std::vector<double>>;
    Matrix dp(N, std::vector<double>(N, 0.0)), dm = dp, cp = dp;
    std::vector<double> received(N, 0.0);
    double dispatch_us = 0, combine_us = 0;            // per step: the slowest rank's exchange, summed over layers
    double dispatch_wait_us = 0, combine_wait_us = 0;  // likewise the barrier before each (the ranks' skew)
    for (size_t a = 0; a < m.ranks.front().moe.size(); ++a) {
        double dx = 0, cx = 0, dw = 0, cw = 0;
        for (size_t i = 0; i < N; ++i) {
            const MoeLayerSamples& s = m.ranks[i].moe[a];
            const double steps = static_cast<double>(std::max<int64_t>(1, s.traffic_steps));
            for (size_t j = 0; j < N && j < s.traffic.dispatch_payload_bytes.size(); ++j) {
                dp[i][j] += s.traffic.dispatch_payload_bytes[j] / steps;
                dm[i][j] += s.traffic.dispatch_meta_bytes[j] / steps;
                cp[i][j] += s.traffic.combine_payload_bytes[j] / steps;
            }
            received[i] += static_cast<double>(s.traffic.rows_received) / steps;
            dx = std::max(dx, s.traffic.dispatch_exchange_us / steps);
            cx = std::max(cx, s.traffic.combine_exchange_us / steps);
            dw = std::max(dw, s.traffic.dispatch_wait_us / steps);
            cw = std::max(cw, s.traffic.combine_wait_us / steps);
        }
        dispatch_us += dx;
        combine_us += cx;
        dispatch_wait_us += dw;
        combine_wait_us += cw;
    }
    double local = 0, remote = 0, intra = 0, inter = 0, dispatch_sent = 0, combine_sent = 0;
    for (size_t i = 0; i < N; ++i)
        for (size_t j = 0; j < N; ++j) {
            const double b = dp[i][j] + dm[i][j] + cp[i][j];
            (i == j ? local : remote) += b;
            if (i != j) (hosts[i] == hosts[j] ? intra : inter) += b;
            dispatch_sent += dp[i][j] + dm[i][j];
            combine_sent += cp[i][j];
        }
    // nccl-tests' all-to-all: algbw = bytes each rank sends (its whole send buffer, itself included) / time;
    // busbw = algbw (n - 1) / n, the share that crosses links.
    const auto bw = [&](double sent_total, double us, double wait_us) {
        const double per_rank = sent_total / static_cast<double>(N);
        const double algbw = us > 0 ? per_rank / (us * 1e-6) / 1e9 : 0.0;
        return json{{"bytes_per_rank", per_rank},
                    {"exchange_us", us},
                    {"wait_us", wait_us},
                    {"algbw_gbps", algbw},
                    {"busbw_gbps", algbw * static_cast<double>(N - 1) / static_cast<double>(N)}};
    };
    return {{"source", "counted"},
            {"basis",
             "bytes per step, summed over the MoE layers run; matrix row = sending rank, column = receiving "
             "rank (dispatch: token rank -> expert rank; combine: expert rank -> token rank); the diagonal "
             "stays on its rank"},
            {"hosts", hosts},
            {"dispatch_payload_bytes", dp},
            {"dispatch_meta_bytes", dm},
            {"combine_payload_bytes", cp},
            {"rows_received", received},
            {"local_bytes", local},
            {"remote_bytes", remote},
            {"intra_node_bytes", intra},
            {"inter_node_bytes", inter},
            {"bandwidth",
             {{"source", "measured"},
              {"definition",
               "nccl-tests all-to-all: algbw = bytes each rank sends (itself included) / time of the "
               "exchange (count exchange and all-to-all-v calls after a barrier, the slowest rank, "
               "summed over layers); busbw = algbw (n - 1) / n; GB/s = 1e9 bytes/s; wait_us: the "
               "barrier before each exchange, the time the ranks waited for the last one to arrive"},
              {"dispatch", bw(dispatch_sent, dispatch_us, dispatch_wait_us)},
              {"combine", bw(combine_sent, combine_us, combine_wait_us)}}}};
}

}  // namespace moebench
