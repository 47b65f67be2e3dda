// SPDX-License-Identifier: Apache-2.0
// compare: verdicts on constructed reports with known noise (pure noise -> same, exit 0; 20% slower -> slower,
// exit 1; a noise band wider than the threshold -> inconclusive, exit 1), matching by axes with a contrast axis,
// unmatched points, points failed or missing in B, and the CLI's exit codes.
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
        runs.push_back({{"status", "ok"},
                        {"model", "tiny"},
                        {"batch", b},
                        {"axes", {{"backend", backend}, {"mode", "decode"}, {"batch", b}, {"context", 0}}},
                        {"iterations", {{"measured", n}}},
                        {"latency", {{"step", stats_json(s)}, {"phases", phases}, {"step_samples_us", s.samples}}},
                        {"throughput", {{"tokens_per_s", b / (s.mean * 1e-6)}}}});
    }
    return json{{"schema", "moebench.report/1"}, {"runs", runs}};
}

}  // namespace

TEST_CASE("classify: the noise band decides same / slower / faster", "[compare]") {
    CompareOptions o;    // k = 3, z = 1.645, floor 1%
    o.threshold = 0.10;  // wider than the 82 us band below (at 5% those points would be inconclusive: next case)
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
    strict.threshold = 0.10;
    Verdict st = classify(1000, 50, 30, 1080, 50, 30, strict);
    CHECK(st.verdict == "slower");
    CHECK(st.noise_us == Approx(3 * std::sqrt(2 * 2500.0 / 30)));
    CHECK(classify(1000, 50, 30, 800, 50, 30, o).verdict == "faster");
    // Tiny spread: a 3% slowdown is real ("slower") but inside the threshold, so not a regression.
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
    CHECK(c["warnings"][0]["message"] ==
          "backend differs: cpu (A) vs cuda (B); compared anyway because --match leaves it out");
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
    // A noise floor wider than the threshold would make every point inconclusive: refused as a setting.
    auto floor = test::run_cli("compare " + pa + " " + pn + " --noise-floor 10% --threshold 5%");
    CHECK(floor.exit_code == 2);
    CHECK_THAT(floor.err, Catch::Contains("--noise-floor"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("classify: a noise band wider than the threshold is inconclusive, with the iterations to rerun",
          "[compare]") {
    CompareOptions o;  // threshold 5%: 50 us of A's 1000
    // 3 samples each, sd 300 (A) and 600 (B): k x se = 3 x sqrt(300^2/3 + 600^2/3) = 1161.9 us; B is 2x A, yet inside
    // the band. Before: "same", and the gate passed.
    Verdict v = classify(1000, 300, 3, 2000, 600, 3, o);
    CHECK(v.verdict == "inconclusive");
    CHECK_FALSE(v.regression);
    CHECK(v.noise_us == Approx(3 * std::sqrt(150000.0)));
    // k^2 (sd_A^2 + sd_B^2) / (threshold x mean_A)^2 = 9 x 450000 / 2500 = 1620 iterations narrow k x se to 50 us ...
    CHECK(v.rerun_iterations == 1620);
    // ... but the spread term, 1.645 x sqrt((300^2 + 600^2) / 2) = 780 us, does not shrink with iterations.
    CHECK(v.spread_too_wide);
    // Only the standard error too wide: sd 25 on 3 samples -> 3 x sqrt(2 x 625 / 3) = 61.2 us > 50; the spread term,
    // 41 us, fits. 9 x 1250 / 2500 = 4.5 -> 5 iterations, and with 5 each it is "same".
    Verdict w = classify(1000, 25, 3, 1010, 25, 3, o);
    CHECK(w.verdict == "inconclusive");
    CHECK(w.rerun_iterations == 5);
    CHECK_FALSE(w.spread_too_wide);
    CHECK(classify(1000, 25, 5, 1010, 25, 5, o).verdict == "same");
    // Beyond the band the verdict stands: 3x slower is a regression, 3x faster is faster.
    CHECK(classify(1000, 300, 3, 3000, 600, 3, o).regression);
    CHECK(classify(3000, 600, 3, 1000, 300, 3, o).verdict == "faster");
}

TEST_CASE("moebench compare: a noisy baseline is inconclusive and fails the gate, saying how many iterations",
          "[compare][cli]") {
    const std::string dir = test::temp_dir("compare-noisy");
    const std::string tiny = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";
    auto r = test::run_cli("run --json - --warmup 0 --iters 3 --backend cpu --model " + tiny + " --batch 2");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    json a = json::parse(r.out);
    // Three steps with a cold first step, as a 3-iteration run without warm-up gives (cv 1.41); B is 2x slower.
    test::set_step_samples(a["runs"][0], {1446.424, 104.679, 100.969});
    json b = a;
    test::scale_times(b["runs"][0], 2.0);
    const std::string pa = dir + "/a.json", pb = dir + "/b.json";
    std::ofstream(pa) << a.dump();
    std::ofstream(pb) << b.dump();
    auto c = test::run_cli("compare " + pa + " " + pb);
    INFO(c.out << c.err);
    // Before: "1 same", exit 0: the 2x slowdown passed.
    CHECK(c.exit_code == 1);
    CHECK_THAT(c.out, Catch::Contains("inconclusive"));
    CHECK_THAT(c.out, Catch::Contains("1 matched: 0 faster, 0 slower, 0 same, 1 inconclusive"));
    CHECK_THAT(c.err, Catch::Contains("inconclusive"));
    CHECK_THAT(c.err, Catch::Contains("rerun with more iterations"));
    // The iterations that narrow 3 standard errors to 5% of A's mean (docs/sweep.md): 9 (sd_A^2 + sd_B^2) / (0.05
    // mean_A)^2.
    const double mean = a["runs"][0]["latency"]["step"]["mean_us"], sd = a["runs"][0]["latency"]["step"]["stdev_us"];
    const auto n = static_cast<int64_t>(std::ceil(9 * (sd * sd + 4 * sd * sd) / std::pow(0.05 * mean, 2)));
    CHECK(n > 1000);
    CHECK_THAT(c.err, Catch::Contains(fmt::format("about {} iterations", n)));
    auto js = test::run_cli("compare " + pa + " " + pb + " --format json");
    CHECK(js.exit_code == 1);
    json cmp = json::parse(js.out);
    CHECK(cmp["points"][0]["verdict"] == "inconclusive");
    CHECK(cmp["points"][0]["step"]["rerun_iterations"] == n);
    CHECK(cmp["counts"]["inconclusive"] == 1);
    CHECK(cmp["exit_code"] == 1);
    // Quiet runs of the same thing pass; 2x slower quiet runs are a regression.
    test::set_step_samples(a["runs"][0], {100.0, 101.0, 102.0});
    b = a;
    std::ofstream(pa) << a.dump();
    std::ofstream(pb) << b.dump();
    auto same = test::run_cli("compare " + pa + " " + pb);
    CHECK(same.exit_code == 0);
    CHECK_THAT(same.out, Catch::Contains("1 matched: 0 faster, 0 slower, 1 same"));
    test::scale_times(b["runs"][0], 2.0);
    std::ofstream(pb) << b.dump();
    auto slow = test::run_cli("compare " + pa + " " + pb);
    CHECK(slow.exit_code == 1);
    CHECK_THAT(slow.out, Catch::Contains("REGRESSION"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("moebench compare: points failed or missing in B fail the gate", "[compare][cli]") {
    const std::string dir = test::temp_dir("compare-missing");
    const std::string tiny = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";
    const std::string pa = dir + "/a.json";
    auto s = test::run_cli("sweep --backend sim --model " + tiny +
                           " --quiet --warmup 0 --iters 2 --batch 1,2,3,4,5,6,7,8 --out " + pa);
    INFO(s.err);
    REQUIRE(s.exit_code == 0);
    const json a = load_json_file(pa);
    REQUIRE(a["runs"].size() == 8);
    auto write = [&](const json& doc) {
        const std::string p = dir + "/b.json";
        std::ofstream(p) << doc.dump();
        return p;
    };
    // B: points 1-3 failed (as a sweep records them), points 4-7 absent. Only point 0 compares, and it is "same".
    json b = a;
    for (int i = 1; i <= 3; ++i)
        b["runs"][i] = {
            {"status", "failed"}, {"error", "cuda error: an illegal memory access"}, {"axes", a["runs"][i]["axes"]}};
    b["runs"].erase(b["runs"].begin() + 4, b["runs"].end());
    b.erase("sweep");
    const std::string pb = write(b);
    auto c = test::run_cli("compare " + pa + " " + pb);
    INFO(c.out << c.err);
    // Before: exit 0 (1 same, 3 not comparable, 4 unmatched).
    CHECK(c.exit_code == 1);
    CHECK_THAT(c.err, Catch::Contains("3 point(s) failed in B"));
    CHECK_THAT(c.err, Catch::Contains("4 point(s) of A missing from B"));
    CHECK_THAT(c.out, Catch::Contains("failed in B"));
    auto js = test::run_cli("compare " + pa + " " + pb + " --format json");
    json cmp = json::parse(js.out);
    CHECK(cmp["counts"]["failed_in_b"] == 3);
    CHECK(cmp["counts"]["missing_in_b"] == 4);
    CHECK(cmp["counts"]["same"] == 1);
    CHECK(cmp["exit_code"] == 1);
    CHECK(cmp["gate_failures"].size() == 2);
    // A Markdown comparison is a document: it says why the gate failed.
    auto md = test::run_cli("compare " + pa + " " + pb + " --format md");
    CHECK_THAT(md.out, Catch::Contains("- gate failed: 3 point(s) failed in B"));
    // --allow-missing lets absent points pass, never failed ones.
    CHECK(test::run_cli("compare " + pa + " " + pb + " --allow-missing").exit_code == 1);
    json fewer = a;
    fewer["runs"].erase(fewer["runs"].begin() + 4, fewer["runs"].end());
    fewer.erase("sweep");
    const std::string pf = write(fewer);
    CHECK(test::run_cli("compare " + pa + " " + pf).exit_code == 1);
    CHECK(test::run_cli("compare " + pa + " " + pf + " --allow-missing").exit_code == 0);
    // A point A ran and B skipped (it no longer fits, say) is missing from B.
    json skipped = a;
    skipped["runs"][5] = {{"status", "skipped"}, {"skip_reason", "does not fit"}, {"axes", a["runs"][5]["axes"]}};
    auto k = test::run_cli("compare " + pa + " " + write(skipped));
    CHECK(k.exit_code == 1);
    CHECK_THAT(k.err, Catch::Contains("1 point(s) of A missing from B"));
    // B having more points than A is fine.
    CHECK(test::run_cli("compare " + pf + " " + pa).exit_code == 0);
    std::filesystem::remove_all(dir);
}
