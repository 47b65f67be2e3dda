// SPDX-License-Identifier: Apache-2.0
// moebench calibrate: the sim replay prices what `run --backend sim` models, the fit recovers parameters it did not
// see from reports the sim made with them, the error table's numbers are the hand-computed ratios, and what is not
// one machine's measurement is refused (docs/calibration.md). devices --cpu-profile writes a profile calibrate takes.
#include "backends/sim/sim_backend.hpp"
#include "cli_helpers.hpp"
#include "common/error.hpp"
#include "common/host_environment.hpp"
#include "compare/calibrate.hpp"
#include "config/hardware.hpp"
#include "harness/runner.hpp"
#include "harness/sim_replay.hpp"
#include "report/formats.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

using namespace moebench;

namespace {

// A cpu-like profile (fp32 rate and bandwidth of a small host) with the sim modeling fp32 arithmetic.
json cpu_like_profile_json(const std::string& machine = "") {
    json j = {{"schema", "moebench.hardware/1"},
              {"name", "cpu-like"},
              {"memory_gib", 32},
              {"memory_bw_gbps", 20},
              {"bf16_tflops", 0.5},
              {"fp32_tflops", 0.5},
              {"gpus_per_node", 1},
              {"sim", {{"dtype", "fp32"}, {"mla_form", "expanded_cache"}}}};
    if (!machine.empty()) j["machine"] = machine;
    return j;
}

HardwareProfile cpu_like_profile() { return hardware_from_json(cpu_like_profile_json(), "cpu-like"); }

SimParams fp32_params(double compute, double memory, double overhead_us) {
    SimParams p = sim_params_from_json({{"dtype", "fp32"}, {"mla_form", "expanded_cache"}}, "sim");
    p.compute_efficiency = compute;
    p.memory_efficiency = memory;
    p.phase_overhead_us = overhead_us;
    return p;
}

RunConfig olmoe_point(Mode mode, int64_t batch, int64_t seq_len, int64_t context) {
    RunConfig c;
    c.model = "olmoe-1b-7b";
    c.layers = 1;
    c.shape.mode = mode;
    c.shape.batch = batch;
    c.shape.seq_len = mode == Mode::prefill ? seq_len : 1;
    c.shape.context = mode == Mode::decode ? context : 0;
    c.precision.dtype = "fp32";
    c.warmup = 0;
    c.iters = 2;
    return c;
}

// A case whose "measurement" is the sim's own step under `truth`.
CalibrationCase synthetic_case(const std::string& name, const RunConfig& run, const HardwareProfile& hw,
                               const SimParams& truth) {
    CalibrationCase c;
    c.name = name;
    c.run = run;
    const ModeledStep s = SimReplay(run, hw, truth).price(truth);
    c.measured_phase_us = s.phase_us;
    c.measured_step_us = s.step_us;
    c.machine = "host test";
    return c;
}

const CalibrationParam& param(const CalibrationResult& r, const std::string& key) {
    for (const CalibrationParam& p : r.params)
        if (p.key == key) return p;
    FAIL("no parameter " << key);
    return r.params.front();
}

std::string write_json(const std::string& dir, const std::string& name, const json& j) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << j.dump(2);
    return path;
}

// A measured report of the tiny OLMoE on the cpu backend (a fraction of a second).
json tiny_cpu_report(int64_t batch) {
    const std::string tiny = std::string(MOEBENCH_SOURCE_DIR) + "/tests/data/conformance/models/tiny-olmoe-1b-7b.json";
    auto r = test::run_cli(
        fmt::format("run --json - --warmup 1 --iters 3 --backend cpu --threads 1 --model {} --batch {}", tiny, batch));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
}

}  // namespace

TEST_CASE("calibrate: the sim replay prices each phase as run --backend sim models it", "[calibrate]") {
    const std::string dir = test::temp_dir("calib-replay");
    const std::string profile = write_json(dir, "cpu-like.json", cpu_like_profile_json());
    for (RunConfig cfg : {olmoe_point(Mode::decode, 4, 1, 256), olmoe_point(Mode::prefill, 1, 128, 0)}) {
        const SimParams p = fp32_params(0.6, 0.45, 7.0);
        json sim = cpu_like_profile_json();
        sim["sim"] = sim_params_to_json(p);
        cfg.backend = "sim";
        cfg.hardware = write_json(dir, "tuned.json", sim);
        cfg.routing_path = "per-token";  // the replay's path: every token's experts, as a measured run routes them
        const json record = run_point(cfg);
        REQUIRE(record["routing"]["path"] == "per-token");
        SimReplay replay(cfg, load_hardware(profile), sim_params_for(load_hardware(profile)));
        replay.price(fp32_params(1.0, 1.0, 3.0));  // priced before under other numbers: no price of those may stay
        const ModeledStep s = replay.price(p);
        REQUIRE(s.phase_us.size() == record["latency"]["phases"].size());
        for (const auto& [phase, us] : s.phase_us) {
            INFO(phase);
            CHECK(us == Approx(record["latency"]["phases"][phase]["p50_us"].get<double>()).epsilon(1e-12));
        }
        CHECK(s.step_us == Approx(record["latency"]["step"]["p50_us"].get<double>()).epsilon(1e-12));
    }
}

TEST_CASE("calibrate: the fit recovers the parameters the sim's own reports were made with", "[calibrate]") {
    const HardwareProfile hw = cpu_like_profile();
    const SimParams truth = fp32_params(0.6, 0.45, 7.0);
    // Memory-bound decode steps, a compute-bound prefill, and small phases that the fixed cost dominates.
    const std::vector<CalibrationCase> cases = {
        synthetic_case("decode-1", olmoe_point(Mode::decode, 1, 1, 512), hw, truth),
        synthetic_case("decode-16", olmoe_point(Mode::decode, 16, 1, 1024), hw, truth),
        synthetic_case("prefill-256", olmoe_point(Mode::prefill, 1, 256, 0), hw, truth),
    };
    const SimParams start = fp32_params(1.0, 1.0, 3.0);
    const CalibrationResult r = calibrate(cases, hw, start, true);
    CHECK(r.after.compute_efficiency == Approx(0.6).epsilon(0.01));
    CHECK(r.after.memory_efficiency == Approx(0.45).epsilon(0.01));
    CHECK(r.after.phase_overhead_us == Approx(7.0).epsilon(0.01));
    CHECK(r.objective_before > 1.0);
    CHECK(r.objective_after < 1e-6);
    CHECK(param(r, "compute_efficiency").status == "fitted");
    CHECK(param(r, "phase_overhead_us").status == "fitted");
    // Without expert parallelism no time depends on the links: left as they were, and said so.
    for (const char* key : {"link_efficiency", "a2a_latency_us", "a2a_network_latency_us"}) {
        CHECK(param(r, key).status == "unused");
        CHECK(param(r, key).after == param(r, key).before);
    }
    CHECK(r.after.dtype == DType::fp32);
}

TEST_CASE("calibrate: a parameter no phase is bound by at the fit keeps its start value", "[calibrate]") {
    const HardwareProfile hw = cpu_like_profile();
    const SimParams truth = fp32_params(0.6, 0.45, 7.0);
    // Decode only: every GEMM is memory-bound whatever the compute efficiency above a threshold.
    const std::vector<CalibrationCase> cases = {
        synthetic_case("decode-1", olmoe_point(Mode::decode, 1, 1, 512), hw, truth),
        synthetic_case("decode-4", olmoe_point(Mode::decode, 4, 1, 2048), hw, truth),
        synthetic_case("decode-8", olmoe_point(Mode::decode, 8, 1, 256), hw, truth),
    };
    const SimParams start = fp32_params(0.9, 1.0, 3.0);
    const CalibrationResult r = calibrate(cases, hw, start, true);
    CHECK(r.after.memory_efficiency == Approx(0.45).epsilon(0.01));
    CHECK(r.after.phase_overhead_us == Approx(7.0).epsilon(0.01));
    CHECK(r.after.compute_efficiency == 0.9);
    CHECK(r.objective_after < 1e-6);
}

TEST_CASE("calibrate: the error table holds measured, modeled before and after, and their ratios", "[calibrate]") {
    const HardwareProfile hw = cpu_like_profile();
    const SimParams p = fp32_params(0.6, 0.45, 7.0);
    // Measured = twice the model: every error is 1/2 - 1 = -50%, the step's too.
    CalibrationCase c = synthetic_case("twice", olmoe_point(Mode::decode, 2, 1, 128), hw, p);
    for (auto& [phase, us] : c.measured_phase_us) us *= 2;
    c.measured_step_us *= 2;
    c.measured_phase_us["dispatch_a2a"] = 5.0;  // measured, not modeled (no expert parallelism): a row without error
    const CalibrationResult r = calibrate({c}, hw, p, false);
    CHECK_FALSE(r.fitted);
    REQUIRE(r.rows.size() == c.measured_phase_us.size() + 1);
    CHECK(r.rows.back().phase == "step");
    const json j = calibration_document(r);
    CHECK(j["schema"] == "moebench.calibration/1");
    int64_t with_error = 0;
    for (const json& row : j["rows"]) {
        INFO(row.dump());
        for (const char* k :
             {"report", "phase", "measured_us", "modeled_before_us", "modeled_after_us", "error_before", "error_after"})
            CHECK(row.contains(k));
        if (row["phase"] == "dispatch_a2a") {
            CHECK(row["modeled_before_us"].is_null());
            CHECK(row["error_before"].is_null());
            continue;
        }
        CHECK(row["measured_us"].get<double>() == Approx(2 * row["modeled_before_us"].get<double>()));
        CHECK(row["error_before"].get<double>() == Approx(-0.5));
        CHECK(row["error_after"].get<double>() == Approx(-0.5));
        ++with_error;
    }
    CHECK(with_error == static_cast<int64_t>(c.measured_phase_us.size()));
    CHECK(j["summary"]["phases_before"]["median_abs_error"].get<double>() == Approx(0.5));
    CHECK(j["summary"]["phases_before"]["within_25pct"] == 0);
    CHECK(j["summary"]["steps_before"]["count"] == 1);
    // ln(1/2)^2 per modeled phase.
    CHECK(r.objective_before == Approx(static_cast<double>(r.num_terms) * std::log(2.0) * std::log(2.0)));
    // The terminal view reads the document alone: the same text from the document written out and read back.
    const std::string text = render_view(j, DocKind::calibration, "text");
    CHECK(render_view(json::parse(j.dump()), DocKind::calibration, "text") == text);
    CHECK_THAT(text, Catch::Contains("-50.0%"));
    CHECK_THAT(text, Catch::Contains("0 of 1 within 25%"));
    CHECK_THAT(text, Catch::Contains("of the profile as given"));
    // The measured-only row: its time, no model, no error.
    CHECK_THAT(text, Catch::Contains(fmt::format("  {:<16} {:>12} {:>12} {:>10}\n", "dispatch_a2a", "5.0", "-", "-")));
    CHECK_THAT(text, Catch::Contains(fmt::format("  {:<16} {:>12} {:>12} {:>10}\n", "step",
                                                 fmt::format("{:.1f}", c.measured_step_us),
                                                 fmt::format("{:.1f}", c.measured_step_us / 2), "-50.0%")));
}

TEST_CASE("calibrate: machine_identity names host, CPU and CPU count", "[calibrate]") {
    CHECK(machine_identity({{"host", "h"}, {"cpu_model", "X"}, {"num_cpus", 4}, {"os", "y"}}) ==
          "host h, CPU X, 4 CPUs");
    CHECK(machine_identity(json::object()).empty());
    CHECK(machine_identity(environment_block()) == machine_identity(environment_block()));
}

TEST_CASE(
    "moebench calibrate: fits measured cpu reports, writes a profile, and refuses what is not one machine's "
    "measurement",
    "[calibrate][cli]") {
    const std::string dir = test::temp_dir("calib-cli");
    const std::string profile = write_json(dir, "cpu-like.json", cpu_like_profile_json());
    const json a = tiny_cpu_report(1), b = tiny_cpu_report(4), c = tiny_cpu_report(16);
    const std::string pa = write_json(dir, "a.json", a), pb = write_json(dir, "b.json", b),
                      pc = write_json(dir, "c.json", c);

    auto ok = test::run_cli(
        fmt::format("calibrate {} {} {} --hardware {} -o {}/fitted.json --format json", pa, pb, pc, profile, dir));
    INFO(ok.err);
    REQUIRE(ok.exit_code == 0);
    const json out = json::parse(ok.out);
    CHECK(out["fitted"] == true);
    const HardwareProfile fitted = load_hardware(dir + "/fitted.json");
    CHECK(fitted.name == "fitted");
    const SimParams fp = sim_params_for(fitted);
    CHECK(fp.dtype == DType::fp32);
    for (const json& p : out["params"]) {
        if (p["key"] == "compute_efficiency") CHECK(fp.compute_efficiency == p["after"].get<double>());
        if (p["key"] == "memory_efficiency") CHECK(fp.memory_efficiency == p["after"].get<double>());
        if (p["key"] == "phase_overhead_us") CHECK(fp.phase_overhead_us == p["after"].get<double>());
    }
    CHECK_THAT(fitted.comment, Catch::Contains("fitted by moebench calibrate"));
    // The text table says both errors per phase.
    auto text = test::run_cli(fmt::format("calibrate {} {} {} --hardware {}", pa, pb, pc, profile));
    CHECK(text.exit_code == 0);
    CHECK_THAT(text.out, Catch::Contains("measured_us"));
    CHECK_THAT(text.out, Catch::Contains("after_us"));
    CHECK_THAT(text.out, Catch::Contains("expert_up"));
    // Held out: the calibrated profile on a report it was not fitted to.
    auto held = test::run_cli(fmt::format("calibrate {} --hardware {}/fitted.json --no-fit", pb, dir));
    CHECK(held.exit_code == 0);
    CHECK_THAT(held.out, Catch::Contains("of the profile as given"));

    auto refused = [&](const std::string& args, const std::string& says) {
        auto r = test::run_cli("calibrate " + args);
        INFO(args << "\n" << r.err);
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::Contains(says));
    };
    // Fewer reports than the 3 parameters these reports' times depend on.
    refused(fmt::format("{} {} --hardware {}", pa, pb, profile), "2 report(s) for 3 parameters to fit");
    // Another machine, among the reports or against the profile's.
    json elsewhere = c;
    elsewhere["environment"]["host"] = "elsewhere";
    const std::string pe = write_json(dir, "elsewhere.json", elsewhere);
    refused(fmt::format("{} {} {} --hardware {}", pa, pb, pe, profile), "is another machine than");
    const std::string other_profile = write_json(dir, "other.json", cpu_like_profile_json("host x, CPU y, 2 CPUs"));
    refused(fmt::format("{} {} {} --hardware {}", pa, pb, pc, other_profile),
            "is another machine than the one profile cpu-like was measured on (host x, CPU y, 2 CPUs)");
    // The profile's own machine passes.
    const std::string mine = write_json(dir, "mine.json", cpu_like_profile_json(machine_identity(a["environment"])));
    CHECK(test::run_cli(fmt::format("calibrate {} {} {} --hardware {}", pa, pb, pc, mine)).exit_code == 0);
    // A modeled report.
    auto sim = test::run_cli("run --json - --backend sim --hardware " + profile + " --config " + pa);
    REQUIRE(sim.exit_code == 0);
    const std::string ps = write_json(dir, "sim.json", json::parse(sim.out));
    refused(fmt::format("{} {} {} --hardware {}", pa, pb, ps, profile), "is not measured");
    // No phases.
    json empty = c;
    empty["runs"][0]["latency"]["phases"] = json::object();
    refused(fmt::format("{} {} {} --hardware {}", pa, pb, write_json(dir, "empty.json", empty), profile),
            "empty.json: runs[0].latency.phases: holds no phase with a time");
    // The same report twice, the output over an input, -o with --no-fit.
    refused(fmt::format("{} {} {} --hardware {}", pa, pb, pa, profile), "the same report is given twice");
    refused(fmt::format("{} {} {} --hardware {} -o {}", pa, pb, pc, profile, pa), "-o");
    refused(fmt::format("{} --hardware {} --no-fit -o {}/x.json", pa, profile, dir), "--no-fit fits nothing");
    // --format from the format table: a calibration has text and json views.
    refused(fmt::format("{} {} {} --hardware {} --format md", pa, pb, pc, profile),
            "--format: a calibration has no md view (got md); use one of: text, json");
}

TEST_CASE("moebench devices --cpu-profile writes this machine's profile, which calibrate takes",
          "[calibrate][cli][slow]") {
    const std::string dir = test::temp_dir("calib-profile");
    // A format the profile lacks is refused before anything is measured.
    auto md = test::run_cli("devices --cpu-profile --format md -o " + dir + "/x.json");
    CHECK(md.exit_code == 2);
    CHECK_THAT(md.err, Catch::Contains("a hardware profile has no md view (got md); use one of: text, json"));
    CHECK_FALSE(std::ifstream(dir + "/x.json").good());
    // -o writes the profile; stdout shows its terminal view, which reads the document alone.
    auto r = test::run_cli("devices --cpu-profile --out " + dir + "/cpu-local.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json doc = json::parse(std::ifstream(dir + "/cpu-local.json"));
    CHECK(r.out == render_view(doc, DocKind::hardware_profile, "text") + "profile: " + dir + "/cpu-local.json\n");
    CHECK_THAT(r.out, Catch::Contains("Hardware profile cpu-local: "));
    CHECK_THAT(r.out, Catch::Contains("memory_bw_gbps"));
    const HardwareProfile hw = load_hardware(dir + "/cpu-local.json");
    CHECK(hw.name == "cpu-local");
    CHECK(hw.machine == machine_identity(environment_block()));
    CHECK(hw.fp32_flops > 0);
    CHECK(hw.memory_bw_bytes_per_s > 0);
    CHECK(hw.gpus_per_node == 1);
    const SimParams p = sim_params_for(hw);
    CHECK(p.dtype == DType::fp32);
    CHECK(p.mla_form == MlaForm::expanded_cache);
    CHECK(p.compute_efficiency == 1.0);
    CHECK(p.memory_efficiency == 1.0);
    // And what it measured is this machine: a cpu report of this machine is taken with it.
    const std::string rep = write_json(dir, "r.json", tiny_cpu_report(2));
    auto c = test::run_cli("calibrate " + rep + " --no-fit --hardware " + dir + "/cpu-local.json");
    INFO(c.err);
    CHECK(c.exit_code == 0);
}
