// SPDX-License-Identifier: Apache-2.0
// compare: verdicts on constructed reports with known noise (pure noise -> same, exit 0; 20% slower -> slower,
// exit 1), matching by axes with a contrast axis, unmatched points, and the CLI's exit codes.
#include "common/error.hpp"
#include "compare/compare.hpp"

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "report_edit.hpp"

using namespace moebench;

namespace {

struct Stats {
    double mean = 0, sd = 0;
    std::vector<double> samples;
};

Stats draw(std::mt19937_64& rng, double mean, double sd, int n) {
    std::normal_distribution<double> d(mean, sd);
    Stats s;
    for (int i = 0; i < n; ++i) s.samples.push_back(d(rng));
    for (double v : s.samples) s.mean += v;
    s.mean /= n;
    for (double v : s.samples) s.sd += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(s.sd / (n - 1));
    return s;
}

// The statistics block of the report schema for these samples (report_edit.hpp: computed from the samples, so the
// reader's consistency checks hold).
json stats_json(const Stats& s) { return test::stats_of(s.samples); }

// A report whose points have step and phase times drawn from normal distributions (a 2% spread: the noise band,
// 1.645 x 2% = 3.3%, is inside the default 5% threshold): `scale` multiplies every mean.
json noisy_report(uint64_t seed, double scale, const std::string& backend, const std::vector<int>& batches) {
    std::mt19937_64 rng(seed);
    const int n = 30;
    json runs = json::array();
    for (int b : batches) {
        double base = 1000.0 + 50.0 * b;
        json phases = json::object();
        double sum = 0;
        for (auto [name, frac] : {std::pair{"qkv_proj", 0.3}, {"expert_up", 0.5}, {"expert_down", 0.2}}) {
            Stats p = draw(rng, scale * base * frac, 0.02 * base * frac, n);
            phases[name] = stats_json(p);
            phases[name]["share"] = frac;
            sum += p.mean;
        }
        Stats s = draw(rng, scale * base, 0.02 * base, n);
        runs.push_back({{"status", "ok"}, {"model", "tiny"}, {"batch", b},
                        {"axes", {{"backend", backend}, {"mode", "decode"}, {"batch", b}, {"context", 0}}},
                        {"iterations", {{"measured", n}}},
                        {"latency", {{"step", stats_json(s)}, {"phases", phases}, {"step_samples_us", s.samples}}},
                        {"throughput", {{"tokens_per_s", b / (s.mean * 1e-6)}}}});
    }
    return json{{"schema", "moebench.report/1"}, {"runs", runs}};
}

}  // namespace

TEST_CASE("classify: the noise band decides same / slower / faster", "[compare]") {
    CompareOptions o;  // k = 3, z = 1.645, floor 1%, threshold 5%
    // se = sqrt(50^2/30 * 2) = 12.9 us -> 38.7 us; pooled sd 50 -> 82.25 us: the band is 82.25 us.
    CHECK(classify(1000, 50, 30, 1030, 50, 30, o).verdict == "same");
    Verdict v = classify(1000, 50, 30, 1200, 50, 30, o);
    CHECK(v.verdict == "slower");
    CHECK(v.ratio == Approx(1.2));
    CHECK(v.regression);
    CHECK(v.noise_us == Approx(1.645 * 50));
    CHECK(classify(1000, 50, 30, 1080, 50, 30, o).verdict == "same");
    // With the spread term off, the same 8% is significant (8 > 3 standard errors).
    CompareOptions strict;
    strict.spread_z = 0;
    Verdict st = classify(1000, 50, 30, 1080, 50, 30, strict);
    CHECK(st.verdict == "slower");
    CHECK(st.noise_us == Approx(3 * std::sqrt(2 * 2500.0 / 30)));
    CHECK(classify(1000, 50, 30, 800, 50, 30, o).verdict == "faster");
    // Tiny spread: a 3% slowdown is real ("slower") but inside the 5% threshold, so not a regression.
    Verdict w = classify(1000, 1, 100, 1030, 1, 100, o);
    CHECK(w.verdict == "slower");
    CHECK_FALSE(w.regression);
    // The floor: 0.5% is "same" even with no measured spread.
    CHECK(classify(1000, 0, 10, 1005, 0, 10, o).verdict == "same");
    CHECK(parse_fraction("5%", "t") == Approx(0.05));
    CHECK(parse_fraction("0.05", "t") == Approx(0.05));
    CHECK(parse_fraction("5", "t") == Approx(0.05));
    CHECK_THROWS_AS(parse_fraction("five", "t"), ConfigError);
}

TEST_CASE("compare: pure noise is all same; a 20% slowdown is slower and exits 1", "[compare]") {
    std::vector<int> batches = {1, 2, 4, 8, 16, 32};
    json a = noisy_report(1, 1.0, "cpu", batches);
    json noise = noisy_report(2, 1.0, "cpu", batches);
    json c = compare_reports(a, noise, CompareOptions{});
    REQUIRE(c["points"].size() == batches.size());
    for (const auto& p : c["points"]) {
        CHECK(p["verdict"] == "same");
        for (const auto& ph : p["phases"]) CHECK(ph["verdict"] == "same");
    }
    CHECK(c["exit_code"] == 0);
    CHECK(c["unmatched_a"].empty());

    json slow = noisy_report(3, 1.2, "cpu", batches);
    json s = compare_reports(a, slow, CompareOptions{});
    for (const auto& p : s["points"]) {
        CHECK(p["verdict"] == "slower");
        CHECK(p["regression"] == true);
        CHECK(p["step"]["ratio"].get<double>() == Approx(1.2).epsilon(0.05));
        CHECK(p["throughput_ratio"].get<double>() == Approx(1 / 1.2).epsilon(0.05));
    }
    CHECK(s["regressions"] == batches.size());
    CHECK(s["exit_code"] == 1);
    // The other way round it is faster and passes.
    json f = compare_reports(slow, a, CompareOptions{});
    for (const auto& p : f["points"]) CHECK(p["verdict"] == "faster");
    CHECK(f["exit_code"] == 0);
    // A threshold above the slowdown lets it pass while still calling it slower.
    CompareOptions loose;
    loose.threshold = 0.30;
    json l = compare_reports(a, slow, loose);
    CHECK(l["counts"]["slower"] == batches.size());
    CHECK(l["exit_code"] == 0);
}

TEST_CASE("compare: every axis is a key; --match leaves the others as the contrast; unmatched points are listed",
          "[compare]") {
    json a = noisy_report(1, 1.0, "cpu", {1, 2, 4});
    json b = noisy_report(2, 1.0, "cuda", {2, 4, 8});
    // By default the backend is a key: cpu and cuda points never match, and nothing comparable is an error.
    std::string msg = test::config_error_of([&] { (void)compare_reports(a, b, CompareOptions{}); });
    CHECK_THAT(msg, Catch::Contains("backend cpu (A) vs cuda (B)"));
    CompareOptions by_batch;
    by_batch.match_keys = {"batch"};
    json c = compare_reports(a, b, by_batch);
    CHECK(c["match_keys"] == json::array({"model", "batch"}));
    CHECK(c["contrast"].contains("backend"));
    CHECK(c["points"].size() == 2);
    REQUIRE(c["unmatched_a"].size() == 1);
    CHECK(c["unmatched_a"][0].get<std::string>().find("batch=1") != std::string::npos);
    REQUIRE(c["unmatched_b"].size() == 1);
    CHECK(c["unmatched_b"][0].get<std::string>().find("batch=8") != std::string::npos);
    REQUIRE(c["warnings"].size() == 1);
    CHECK(c["warnings"][0]["message"] == "backend differs: cpu (A) vs cuda (B); compared anyway because --match leaves it out");
    std::string text = render_comparison(c, "text");
    CHECK(text.find("contrast: backend = cpu (A) vs cuda (B)") != std::string::npos);
    std::string md = render_comparison(c, "md");
    CHECK(md.find("| point | phase |") != std::string::npos);
    CHECK(md.find("- warning: backend differs") != std::string::npos);
    // Same backend: every axis matches, no contrast, no warning.
    json d = compare_reports(a, noisy_report(2, 1.0, "cpu", {2, 4, 8}), CompareOptions{});
    CHECK(d["contrast"].empty());
    CHECK(d["warnings"].empty());
    CHECK(d["points"].size() == 2);
    CHECK_THROWS_AS(compare_reports(json::object(), b, CompareOptions{}), ConfigError);
}

TEST_CASE("compare --format md: a '|' in a third-party model name stays inside its cell", "[compare]") {
    json a = noisy_report(1, 1.0, "cpu", {2, 4});
    json b = noisy_report(2, 1.0, "cpu", {2, 4});
    // Two models, so the model is shown in the point labels.
    for (json* r : {&a, &b}) {
        (*r)["runs"][0]["model"] = "evil|model";
        (*r)["runs"][1]["model"] = "other|model";
    }
    std::string md = render_comparison(compare_reports(a, b, CompareOptions{}), "md");
    size_t rows = 0;
    size_t pos = 0;
    while ((pos = md.find('\n', pos)) != std::string::npos) {
        size_t start = pos + 1;
        size_t end = md.find('\n', start);
        std::string row = md.substr(start, end == std::string::npos ? std::string::npos : end - start);
        pos = start;
        if (row.empty() || row[0] != '|') continue;
        // Every table row has the header's 8 unescaped separators (7 columns).
        size_t bars = 0;
        for (size_t i = 0; i < row.size(); ++i)
            if (row[i] == '|' && (i == 0 || row[i - 1] != '\\')) ++bars;
        CHECK(bars == 8);
        ++rows;
    }
    CHECK(rows >= 4);  // header, rule, steps, phases
    CHECK(md.find("evil\\|model") != std::string::npos);
}

TEST_CASE("moebench compare: exit codes for CI", "[compare][cli]") {
    std::vector<int> batches = {1, 4, 16};
    std::string dir = test::temp_dir("compare");
    std::string pa = dir + "/a.json", pn = dir + "/n.json", ps = dir + "/s.json";
    std::ofstream(pa) << noisy_report(1, 1.0, "cpu", batches).dump();
    std::ofstream(pn) << noisy_report(2, 1.0, "cpu", batches).dump();
    std::ofstream(ps) << noisy_report(3, 1.2, "cpu", batches).dump();
    auto same = test::run_cli("compare " + pa + " " + pn);
    CHECK(same.exit_code == 0);
    CHECK(same.out.find("3 matched: 0 faster, 0 slower, 3 same") != std::string::npos);
    auto slow = test::run_cli("compare " + pa + " " + ps + " --threshold 5%");
    CHECK(slow.exit_code == 1);
    CHECK(slow.out.find("REGRESSION") != std::string::npos);
    CHECK(slow.err.find("moebench: regression: 3 point(s) slower") != std::string::npos);  // an answer, not an error
    auto js = test::run_cli("compare " + pa + " " + ps + " --format json --threshold 25%");
    CHECK(js.exit_code == 0);
    CHECK(json::parse(js.out)["counts"]["slower"] == 3);
    CHECK(test::run_cli("compare " + pa + " " + ps + " --threshold lots").exit_code == 2);
    CHECK(test::run_cli("compare " + pa + " " + dir + "/missing.json").exit_code == 2);
    std::filesystem::remove_all(dir);
}
