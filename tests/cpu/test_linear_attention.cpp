// SPDX-License-Identifier: Apache-2.0
// Linear attention on the cpu backend (hybrid models) against a straightforward double-precision reference written
// from the published equations: gated DeltaNet (Qwen3-Next) and lightning attention (MiniMax), prefill from a zero
// state and decode from the stored state; plus the gated attention output (Qwen3-Next) and partial RoPE.
#include "backends/cpu/cpu_backend_impl.hpp"
#include "config/model_config.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace moebench;
using namespace moebench::cpu;

namespace {

json hybrid_model(const std::string& kind) {
    json la = kind == "lightning" ? json{{"kind", "lightning"}, {"num_key_heads", 2}, {"key_head_dim", 8}}
                                  : json{{"kind", "gated_delta_net"}, {"num_key_heads", 2},  {"num_value_heads", 4},
                                         {"key_head_dim", 8},         {"value_head_dim", 6}, {"conv_kernel", 4}};
    return {{"moebench", "model/1"},
            {"name", "tiny-" + kind},
            {"vocab_size", 64},
            {"hidden_size", 32},
            {"num_layers", 3},
            {"attention", {{"num_heads", 4}, {"num_kv_heads", 2}, {"head_dim", 8}}},
            {"moe", {{"num_experts", 4}, {"top_k", 2}, {"expert_intermediate_size", 16}}},
            {"linear_attention", la},
            {"linear_attention_layers", {0, 1}},
            {"norm_eps", 1e-6}};
}

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sig(x); }

// Runs attn_norm .. o_proj of layer slot 0 and returns (input residual, output residual, backend for its weights).
struct Block {
    CpuBackend b;
    std::vector<float> x_in, x_out;
};
void run_block(Block& blk, const ModelConfig& m, const StepShape& shape, int64_t layer) {
    RunOptions opt;
    opt.seed = 11;
    opt.num_threads = 2;
    blk.b.prepare(m, {layer}, shape, opt);
    blk.b.begin_step();
    const int64_t n = blk.b.num_tokens() * m.hidden_size;
    blk.x_in.assign(blk.b.hidden(), blk.b.hidden() + n);
    const Phase attn = m.is_linear_attention_layer(layer) ? Phase::linear_attention : Phase::attention;
    for (Phase p : {Phase::attn_norm, Phase::qkv_proj, attn, Phase::o_proj}) blk.b.run_phase(p, 0);
    blk.x_out.assign(blk.b.hidden(), blk.b.hidden() + n);
}

std::vector<double> matrix(ThreadPool& pool, const FBuf& w, int64_t n, int64_t k) {
    std::vector<float> r = row_major(pool, w.data(), w.panels, n, k);
    return std::vector<double>(r.begin(), r.end());
}

// The reference: the residual after the layer's linear-attention block, from the backend's weights.
std::vector<double> reference(const ModelConfig& m, Block& blk, const StepShape& shape) {
    ThreadPool pool(1);
    const LayerWeights& w = blk.b.weights().layers[0];
    const Dims& d = blk.b.dims();
    const int64_t H = m.hidden_size, T = blk.b.num_tokens(), B = shape.batch, S = T / B, W = d.la_in;
    const double eps = m.norm_eps;
    // attn_norm, then the projections.
    std::vector<double> xn(T * H), proj(T * W, 0.0);
    for (int64_t t = 0; t < T; ++t) {
        double ss = 0;
        for (int64_t i = 0; i < H; ++i) ss += double(blk.x_in[t * H + i]) * blk.x_in[t * H + i];
        for (int64_t i = 0; i < H; ++i)
            xn[t * H + i] = blk.x_in[t * H + i] / std::sqrt(ss / H + eps) * w.attn_norm_w.data()[i];
    }
    const std::vector<double> win = matrix(pool, w.la_in, W, H), wo = matrix(pool, w.w_o, H, d.la_v);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < W; ++o)
            for (int64_t i = 0; i < H; ++i) proj[t * W + o] += xn[t * H + i] * win[o * H + i];
    const bool decode = shape.mode == Mode::decode && shape.context > 0;  // else no earlier token: zero state
    const int64_t Dk = d.la_dk, Dv = d.la_dv, Nv = d.la_nv, V = d.la_v;
    std::vector<double> att(T * V, 0.0);
    for (int64_t seq = 0; seq < B; ++seq)
        for (int64_t h = 0; h < Nv; ++h) {
            std::vector<double> St(Dk * Dv, 0.0);
            if (decode)
                for (int64_t i = 0; i < Dk * Dv; ++i) St[i] = w.la_state.data()[(seq * Nv + h) * Dk * Dv + i];
            for (int64_t pos = 0; pos < S; ++pos) {
                const int64_t t = seq * S + pos;
                std::vector<double> q(Dk), k(Dk), v(Dv), o(Dv, 0.0);
                if (d.la_delta) {
                    const int64_t C = d.la_channels, K = d.la_conv, kh = h / (Nv / d.la_nk), Kw = d.la_nk * Dk;
                    auto conv = [&](int64_t c) {  // causal conv of channel c at this token, then SiLU
                        double acc = 0;
                        for (int64_t j = 0; j < K; ++j) {
                            const int64_t p = pos - (K - 1) + j;
                            double x = 0;
                            if (p >= 0)
                                x = proj[(seq * S + p) * W + c];
                            else if (decode)
                                x = w.la_conv_state.data()[(seq * C + c) * (K - 1) + (K - 1 + p)];
                            acc += w.la_conv.data()[c * K + j] * x;
                        }
                        return silu(acc);
                    };
                    double qn = 0, kn = 0;
                    for (int64_t i = 0; i < Dk; ++i) {
                        q[i] = conv(kh * Dk + i);
                        k[i] = conv(Kw + kh * Dk + i);
                        qn += q[i] * q[i];
                        kn += k[i] * k[i];
                    }
                    for (int64_t i = 0; i < Dk; ++i) {
                        q[i] /= std::sqrt(qn + 1e-6) * std::sqrt(double(Dk));
                        k[i] /= std::sqrt(kn + 1e-6);
                    }
                    for (int64_t j = 0; j < Dv; ++j) v[j] = conv(2 * Kw + h * Dv + j);
                    const double bt = proj[t * W + C + V + h], at = proj[t * W + C + V + Nv + h];
                    const double beta = sig(bt);
                    const double g =
                        -std::exp(double(w.la_a_log.data()[h])) * std::log1p(std::exp(at + w.la_dt_bias.data()[h]));
                    for (double& s : St) s *= std::exp(g);
                    std::vector<double> delta(Dv);
                    for (int64_t j = 0; j < Dv; ++j) {
                        double kv = 0;
                        for (int64_t i = 0; i < Dk; ++i) kv += St[i * Dv + j] * k[i];
                        delta[j] = beta * (v[j] - kv);
                    }
                    for (int64_t i = 0; i < Dk; ++i)
                        for (int64_t j = 0; j < Dv; ++j) St[i * Dv + j] += k[i] * delta[j];
                    for (int64_t j = 0; j < Dv; ++j)
                        for (int64_t i = 0; i < Dk; ++i) o[j] += St[i * Dv + j] * q[i];
                    double ss = 0;
                    for (double x : o) ss += x * x;
                    for (int64_t j = 0; j < Dv; ++j)
                        att[t * V + h * Dv + j] =
                            o[j] / std::sqrt(ss / Dv + eps) * w.la_norm.data()[j] * silu(proj[t * W + C + h * Dv + j]);
                } else {
                    const double slope = std::pow(2.0, -8.0 * (h + 1) / Nv);
                    const double depth = 1.0 - double(w.layer) / double(m.num_layers - 1);
                    const double decay = std::exp(-slope * (depth + 1e-5));
                    for (int64_t i = 0; i < Dk; ++i) {
                        q[i] = silu(proj[t * W + h * Dk + i]);
                        k[i] = silu(proj[t * W + V + h * Dk + i]);
                    }
                    for (int64_t j = 0; j < Dv; ++j) v[j] = silu(proj[t * W + 2 * V + h * Dv + j]);
                    for (int64_t i = 0; i < Dk; ++i)
                        for (int64_t j = 0; j < Dv; ++j) St[i * Dv + j] = decay * St[i * Dv + j] + k[i] * v[j];
                    for (int64_t j = 0; j < Dv; ++j)
                        for (int64_t i = 0; i < Dk; ++i) att[t * V + h * Dv + j] += St[i * Dv + j] * q[i];
                }
            }
        }
    if (!d.la_delta)  // RMSNorm over all heads, sigmoid output gate
        for (int64_t t = 0; t < T; ++t) {
            double ss = 0;
            for (int64_t i = 0; i < V; ++i) ss += att[t * V + i] * att[t * V + i];
            for (int64_t i = 0; i < V; ++i)
                att[t * V + i] =
                    att[t * V + i] / std::sqrt(ss / V + eps) * w.la_norm.data()[i] * sig(proj[t * W + 3 * V + i]);
        }
    std::vector<double> out(T * H);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < H; ++o) {
            double s = blk.x_in[t * H + o];
            for (int64_t i = 0; i < V; ++i) s += att[t * V + i] * wo[o * V + i];
            out[t * H + o] = s;
        }
    return out;
}

double rel_err(const std::vector<float>& a, const std::vector<double>& ref) {
    double e = 0, r = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        e += (a[i] - ref[i]) * (a[i] - ref[i]);
        r += ref[i] * ref[i];
    }
    return std::sqrt(e / r);
}

}  // namespace

TEST_CASE("linear attention block matches the reference (gated DeltaNet, lightning; prefill and decode)",
          "[cpu][linear_attention]") {
    for (const char* kind : {"gated_delta_net", "lightning"})
        for (const auto& [mode, context] :
             {std::pair{Mode::prefill, 0}, std::pair{Mode::decode, 5}, std::pair{Mode::decode, 0}}) {
            // Decode from an empty cache (context 0) starts from a zero state; it read a state never stored (SIGSEGV).
            INFO(kind << " " << to_string(mode) << " context " << context);
            const ModelConfig m = model_from_json(hybrid_model(kind), "tiny.json");
            validate(m, "tiny.json");
            StepShape shape;
            shape.mode = mode;
            shape.batch = mode == Mode::prefill ? 2 : 3;
            shape.seq_len = mode == Mode::prefill ? 7 : 1;
            shape.context = context;
            for (int64_t layer : {0, 1}) {  // the lightning decay depends on the layer
                Block blk;
                run_block(blk, m, shape, layer);
                const std::vector<double> ref = reference(m, blk, shape);
                CHECK(rel_err(blk.x_out, ref) < 1e-5);
                // The block changed the residual (the check is not vacuous).
                CHECK(rel_err(blk.x_in, ref) > 1e-3);
            }
        }
}

TEST_CASE("a step with linear attention is repeatable: the stored state is not overwritten",
          "[cpu][linear_attention]") {
    const ModelConfig m = model_from_json(hybrid_model("gated_delta_net"), "tiny.json");
    StepShape shape;
    shape.batch = 2;
    shape.context = 4;
    Block a, b;
    run_block(a, m, shape, 0);
    a.b.begin_step();
    for (Phase p : {Phase::attn_norm, Phase::qkv_proj, Phase::linear_attention, Phase::o_proj}) a.b.run_phase(p, 0);
    const std::vector<float> again(a.b.hidden(), a.b.hidden() + a.x_out.size());
    CHECK(again == a.x_out);
}

TEST_CASE("gated attention output and partial RoPE (Qwen3-Next's full-attention layers)", "[cpu][linear_attention]") {
    json j = hybrid_model("gated_delta_net");
    j["attention"]["output_gate"] = true;
    j["attention"]["rotary_dim"] = 4;
    const ModelConfig m = model_from_json(j, "tiny.json");
    validate(m, "tiny.json");
    StepShape shape;
    shape.mode = Mode::prefill;
    shape.batch = 1;
    shape.seq_len = 5;
    Block gated;
    run_block(gated, m, shape, 2);  // layer 2: softmax attention
    const Dims& d = gated.b.dims();
    CHECK(d.qkv_width == (2 * 4 + 2 * 2) * 8);  // q | k | v | gate
    CHECK(d.rot_dim == 4);
    // Same seed without the gate: same residual in, a different block output (the gate scales it by sigmoid < 1).
    j["attention"]["output_gate"] = false;
    const ModelConfig plain_m = model_from_json(j, "tiny.json");
    Block plain;
    run_block(plain, plain_m, shape, 2);
    CHECK(plain.x_in == gated.x_in);
    double gated_delta = 0, plain_delta = 0;
    for (size_t i = 0; i < plain.x_in.size(); ++i) {
        gated_delta += std::fabs(gated.x_out[i] - gated.x_in[i]);
        plain_delta += std::fabs(plain.x_out[i] - plain.x_in[i]);
    }
    CHECK(gated_delta < plain_delta);  // |a * sigmoid(g)| < |a| element-wise, through the same o_proj on average
    CHECK(gated_delta > 0);
}
