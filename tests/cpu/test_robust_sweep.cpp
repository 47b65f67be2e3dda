// SPDX-License-Identifier: Apache-2.0
// Robustness of sweeps as a user drives them: sweep configs and their sweep block, --set against flags and axes,
// points naming what is not there, output folders, and the journal that a second sweep, a signal, a SIGKILL or an
// edited model file meets. Each is refused by name (exit 2) or stopped cleanly with a journal --resume finishes,
// never two sweeps on one journal or a silent mix; each failed before its fix.
#include "cli_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using moebench::test::expect_exit2;
using moebench::test::journal_lines;
using moebench::test::read_json;
using moebench::test::read_text;
using moebench::test::run_cli;
using moebench::test::sim_sweep;
using moebench::test::temp_dir;
using moebench::test::wait_exit;
using moebench::test::write_json;
using nlohmann::json;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";

// 12 points of >= `point_s` seconds each, so that a signal or a second sweep lands mid-sweep.
std::vector<std::string> sweep_args(const std::string& dir, double point_s) {
    return {MOEBENCH_BIN, "sweep",
            "--model",    kTiny,
            "--backend",  "cpu",
            "--batch",    "1..8",
            "--context",  "0,16,32",
            "--set",      "warmup=1",
            "--set",      "iters=3",
            "--set",      "min_time_s=" + std::to_string(point_s),
            "--set",      "max_iters=1000000",  // min_time_s is bounded by max_iters (1000 of ~20 us by default)
            "--out",      dir + "/sweep.json",
            "--journal",  dir + "/sweep.jsonl",
            "--quiet"};
}
constexpr size_t kPoints = 12;

std::string shell_args(const std::vector<std::string>& args) {
    std::string cmd;
    for (size_t i = 1; i < args.size(); ++i) cmd += "'" + args[i] + "' ";
    return cmd;
}

// Starts the binary with `args` (args[0] is the binary), stderr to `err_path`.
pid_t spawn(const std::vector<std::string>& args, const std::string& err_path) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        (void)!::freopen(err_path.c_str(), "w", stderr);
        (void)!::freopen("/dev/null", "w", stdout);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    return pid;
}

// Waits until the journal holds `n` lines; false if the process exited (its status in *status) or 60 s passed.
bool wait_for_points(pid_t pid, const std::string& journal, size_t n, int* status) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
        if (journal_lines(journal).size() >= n) return true;
        if (::waitpid(pid, status, WNOHANG) == pid) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
}

}  // namespace

TEST_CASE("a second sweep on a journal in use refuses, naming the journal and the other process",
          "[robust][sweep_lock][cli]") {
    const std::string dir = temp_dir("lock");
    // Points of >= 0.8 s: the first sweep is still running when the second (whose start-up alone can take
    // seconds on a busy machine) reaches the journal.
    const auto args = sweep_args(dir, 0.8);
    const std::string journal = dir + "/sweep.jsonl";
    const pid_t first = spawn(args, dir + "/first.err");
    REQUIRE(first > 0);
    int status = 0;
    REQUIRE(wait_for_points(first, journal, 1, &status));

    // Both ways a second sweep could join: continuing the journal, or starting it afresh.
    for (const std::string extra : {"--resume", ""}) {
        auto r = run_cli(shell_args(args) + extra);
        INFO(extra << "\n" << r.err);
        if (::waitpid(first, &status, WNOHANG) == first)  // the first one must still be running
            FAIL("the first sweep ended early (status " << status << "): " << read_text(dir + "/first.err"));
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::StartsWith("moebench: error: --journal: another sweep is running on this journal"));
        CHECK_THAT(r.err, Catch::Contains("(process " + std::to_string(first) + ")"));
        CHECK_THAT(r.err, Catch::Contains(journal));
    }
    ::kill(first, SIGTERM);
    REQUIRE(wait_exit(first, &status, std::chrono::seconds(60)));
    INFO(read_text(dir + "/first.err"));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + SIGTERM);

    // The refused sweeps added nothing: every point in the journal once.
    std::set<std::string> keys;
    const auto lines = journal_lines(journal);
    for (const auto& j : lines) keys.insert(j.at("key").get<std::string>());
    CHECK(lines.size() >= 1);
    CHECK(keys.size() == lines.size());
    CHECK_FALSE(std::filesystem::exists(journal + ".lock"));  // released and removed on exit
}

TEST_CASE("SIGTERM, SIGINT and SIGHUP stop a sweep with exit 128+signal and a journal that --resume finishes",
          "[robust][sweep_signal][cli]") {
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
        INFO("signal " << sig);
        const std::string dir = temp_dir("signal");
        const auto args = sweep_args(dir, 0.1);
        const std::string journal = dir + "/sweep.jsonl", out = dir + "/sweep.json";
        const pid_t pid = spawn(args, dir + "/err");
        REQUIRE(pid > 0);
        int status = 0;
        REQUIRE(wait_for_points(pid, journal, 1, &status));
        ::kill(pid, sig);
        REQUIRE(wait_exit(pid, &status, std::chrono::seconds(60)));
        const std::string err = read_text(dir + "/err");
        INFO(err);
        REQUIRE(WIFEXITED(status));  // it stopped itself, cleanly
        CHECK(WEXITSTATUS(status) == 128 + sig);
        CHECK_THAT(err, Catch::Contains("moebench: stopped: sweep stopped by SIG"));
        CHECK_THAT(err, Catch::Contains("--resume"));

        // The report of what finished is written whole; the journal holds each finished point once.
        const json report = json::parse(read_text(out));
        CHECK(report["sweep"]["stop_reason"] == "interrupted");
        const auto before = journal_lines(journal);
        REQUIRE(before.size() >= 1);
        REQUIRE(before.size() < kPoints);
        CHECK(report["runs"].size() == before.size());
        CHECK_FALSE(std::filesystem::exists(journal + ".lock"));

        if (sig != SIGTERM) continue;  // one resume is enough to show the journal is consistent
        auto r = run_cli(shell_args(args) + "--resume");
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        const auto after = journal_lines(journal);
        std::set<std::string> keys;
        for (const auto& j : after) keys.insert(j.at("key").get<std::string>());
        CHECK(after.size() == kPoints);
        CHECK(keys.size() == kPoints);
        for (size_t i = 0; i < before.size(); ++i) CHECK(after[i] == before[i]);
        const json done = json::parse(read_text(out));
        CHECK(done["sweep"]["stop_reason"] == "done");
        CHECK(done["sweep"]["resumed"] == before.size());
    }
}

TEST_CASE("a SIGKILLed sweep leaves no lock that blocks --resume", "[robust][sweep_lock][cli]") {
    const std::string dir = temp_dir("killlock");
    const auto args = sweep_args(dir, 0.05);
    const std::string journal = dir + "/sweep.jsonl";
    const pid_t pid = spawn(args, dir + "/err");
    REQUIRE(pid > 0);
    int status = 0;
    REQUIRE(wait_for_points(pid, journal, 1, &status));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    // The lock is the journal's own (a flock on its inode): nothing is left behind to block --resume.
    CHECK_FALSE(std::filesystem::exists(journal + ".lock"));
    auto r = run_cli(shell_args(args) + "--resume");
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(journal_lines(journal).size() == kPoints);
    CHECK_FALSE(std::filesystem::exists(journal + ".lock"));
}

TEST_CASE("sweep creates no output folder before its config is valid", "[robust][sweep_outputs][cli]") {
    const std::string dir = temp_dir("outputs");
    const std::string out = dir + "/new/deeper/sweep.json";
    const std::string journal_dir = dir + "/journals";
    const std::string base =
        "sweep --model " + kTiny + " --backend cpu --quiet --out " + out + " --journal " + journal_dir + "/j.jsonl ";
    for (const std::string bad :
         {"--batch 1,0", "--batch 1,2 --knee 2", "--batch 1,2 --time-budget -1", "--batch 1,2 --time-budget nan",
          "--batch 1,2 --format nope", "--batch 1,2 --threads 100000"}) {
        auto r = run_cli(base + bad);
        INFO(bad << "\n" << r.err);
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::StartsWith("moebench: error: "));
        CHECK_FALSE(std::filesystem::exists(dir + "/new"));
        CHECK_FALSE(std::filesystem::exists(journal_dir));
    }
}

TEST_CASE("a sweep block of the wrong shape is exit 2 naming the key, not a JSON type error",
          "[robust][sweep_outputs][cli]") {
    const std::string dir = temp_dir("block");
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"({"sweep": 5})", "sweep: must be an object (got 5)"},
        {R"({"sweep": {"knee_fraction": [0.9]}})", "sweep.knee_fraction: must be a number"},
        {R"({"sweep": {"time_budget_s": "x"}})", "sweep.time_budget_s: must be a number"},
        {R"({"sweep": {"slo_p95_ms": "50"}})", "sweep.slo_p95_ms: must be a number"},
        {R"({"sweep": {"slo_p95": 50}})", "sweep.slo_p95: unknown sweep option"}};
    for (const auto& [text, want] : cases) {
        const std::string cfg = moebench::test::write_temp("sweep.json", text);
        auto r = run_cli("sweep --config " + cfg + " --model " + kTiny + " --backend cpu --batch 1 --quiet --out " +
                         dir + "/new/s.json");
        INFO(text << "\n" << r.err);
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::StartsWith("moebench: error: " + want));
        CHECK_FALSE(std::filesystem::exists(dir + "/new"));
    }
}

TEST_CASE("a valid sweep makes the folders of its report and journal", "[robust][sweep_outputs][cli]") {
    const std::string dir = temp_dir("folders");
    const std::string out = dir + "/a/b/s.json", journal = dir + "/j/k/s.jsonl";
    auto r =
        run_cli("sweep --model " + kTiny + " --backend cpu --batch 1,2 --set warmup=0 --set iters=1 --quiet --out " +
                out + " --journal " + journal);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(std::filesystem::exists(out));
    CHECK(journal_lines(journal).size() == 2);
    CHECK_FALSE(std::filesystem::exists(journal + ".lock"));
}

TEST_CASE("sweep: --set of a field that a flag also sets is refused, naming both", "[robust][sweep][cli]") {
    const std::string dir = temp_dir("trust-sweep-set");
    const std::string out = " --backend sim --warmup 0 --iters 1 --quiet --out " + dir + "/s.json";
    expect_exit2("sweep --model " + kTiny + " --set model=mixtral-8x7b" + out,
                 {"--model", "--set model=mixtral-8x7b", "both set run config field model"});
    expect_exit2("sweep --model " + kTiny + " --batch 1 --set batch=2,4" + out, {"--batch", "--set batch=2,4"});
    expect_exit2("sweep --model " + kTiny + " --set batch=1 --set batch=2" + out, {"--set batch=1", "--set batch=2"});
    CHECK_FALSE(fs::exists(dir + "/s.json"));
    CHECK_FALSE(fs::exists(dir + "/s.jsonl"));
}

TEST_CASE("sweep: a one-valued --set replaces the config's axis of that field", "[robust][sweep][cli]") {
    const std::string dir = temp_dir("trust-sweep-axis");
    const std::string cfg =
        write_json(dir + "/cfg.json",
                   {{"model", kTiny}, {"backend", "sim"}, {"warmup", 0}, {"iters", 1}, {"axes", {{"batch", {1, 2}}}}});
    const auto r = run_cli("sweep --config " + cfg + " --set batch=4 --quiet --out " + dir + "/s.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json report = read_json(dir + "/s.json");
    REQUIRE(report["runs"].size() == 1);  // was 2 points of batch 1 and 2, the --set unused
    CHECK(report["runs"][0]["batch"] == 4);
}

TEST_CASE("sweep: a point naming a missing model, hardware or routing stops the sweep before it runs",
          "[robust][sweep][cli]") {
    const std::string dir = temp_dir("trust-sweep-missing");
    const std::string out = " --backend sim --warmup 0 --iters 1 --batch 1 --quiet --out " + dir + "/s.json";
    // Was: the missing point skipped, the tiny model run, exit 0.
    expect_exit2("sweep --set model=" + dir + "/missing.json," + kTiny + out,
                 {"sweep point model=" + dir + "/missing.json", "file not found"});
    expect_exit2("sweep --model " + kTiny + " --routing bogus,uniform" + out,
                 {"sweep point ", "routing=bogus", "unknown routing kind 'bogus'"});
    expect_exit2("sweep --model " + kTiny + " --routing uniform,trace:" + dir + "/none.safetensors" + out,
                 {"routing=trace:", "none.safetensors"});
    expect_exit2("sweep --model " + kTiny + " --set hardware=h200-sxm," + dir + "/none.json" + out,
                 {"none.json", "file not found"});
    expect_exit2("sweep --model " + kTiny + " --layers 1,3" + out,
                 {"sweep point ", "layers=3", "exceeds the 2 layers"});
    CHECK_FALSE(fs::exists(dir + "/s.json"));
    CHECK_FALSE(fs::exists(dir + "/s.jsonl"));
}

TEST_CASE("a second sweep reaching a running sweep's journal through a link refuses", "[robust][journal][cli]") {
    const std::string dir = temp_dir("lock-link");
    const std::string journal = dir + "/sweep.jsonl";
    // 12 points of >= 0.8 s: the first sweep is still running when the second reaches the journal.
    const std::vector<std::string> common = {MOEBENCH_BIN, "sweep",
                                             "--model",    kTiny,
                                             "--backend",  "cpu",
                                             "--batch",    "1..8",
                                             "--context",  "0,16,32",
                                             "--set",      "warmup=1",
                                             "--set",      "iters=3",
                                             "--set",      "min_time_s=0.8",
                                             "--set",      "max_iters=1000000",
                                             "--quiet"};
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--out", dir + "/first.json", "--journal", journal});
    const pid_t first = ::fork();
    REQUIRE(first >= 0);
    if (first == 0) {
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        (void)!::freopen("/dev/null", "w", stderr);
        (void)!::freopen("/dev/null", "w", stdout);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int status = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (journal_lines(journal).empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
        REQUIRE(::waitpid(first, &status, WNOHANG) == 0);  // still running
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    REQUIRE_FALSE(journal_lines(journal).empty());

    // A symbolic link and a hard link: other paths, the same file. Before: the lock was on "<path>.lock", so both
    // sweeps appended to one journal (21 lines for 12 keys).
    fs::create_symlink(journal, dir + "/link.jsonl");
    fs::create_hard_link(journal, dir + "/hard.jsonl");
    for (const std::string name : {"link.jsonl", "hard.jsonl"}) {
        std::string cmd;
        for (size_t i = 1; i < common.size(); ++i) cmd += "'" + common[i] + "' ";
        auto r = run_cli(cmd + "--journal " + dir + "/" + name + " --out " + dir + "/" + name + ".json --resume");
        INFO(name);
        REQUIRE(::waitpid(first, &status, WNOHANG) == 0);  // the first one must still be running
        expect_exit2(r, {"--journal: another sweep is running on this journal",
                         "(process " + std::to_string(first) + ")", name});
    }
    ::kill(first, SIGTERM);
    ::waitpid(first, &status, 0);
    std::set<std::string> keys;
    const auto lines = journal_lines(journal);
    for (const auto& j : lines) keys.insert(j.at("key").get<std::string>());
    CHECK(keys.size() == lines.size());  // every point once
    CHECK_FALSE(fs::exists(journal + ".lock"));
}

TEST_CASE("--resume after the model file was edited refuses, naming the model file", "[robust][journal][cli]") {
    const std::string dir = temp_dir("edited-model");
    const std::string model = dir + "/model.json";
    fs::copy_file(kTiny, model);
    // The model as an axis (--model) and as a fixed field of the config: both are checked by content.
    const std::string config = dir + "/sweep.json";
    std::ofstream(config) << json{{"model", model}, {"backend", "sim"}, {"context", 64}}.dump();
    const std::vector<std::string> sweeps = {
        sim_sweep(model, "1,2", dir + "/axis.json"),
        "sweep --config " + config + " --quiet --warmup 0 --iters 2 --batch 1,2 --out " + dir + "/fixed.json"};
    for (const auto& s : sweeps) REQUIRE(run_cli(s).exit_code == 0);

    // The same bytes at another path are the same model: a fixed model is matched by content, not by its path.
    const std::string moved = dir + "/moved.json";
    fs::copy_file(model, moved);
    std::ofstream(dir + "/sweep-moved.json") << json{{"model", moved}, {"backend", "sim"}, {"context", 64}}.dump();
    auto same =
        run_cli("sweep --config " + dir + "/sweep-moved.json --quiet --warmup 0 --iters 2 --batch 1,2,4 --out " + dir +
                "/fixed.json --resume");
    INFO(same.err);
    REQUIRE(same.exit_code == 0);
    CHECK(json::parse(read_text(dir + "/fixed.json"))["sweep"]["resumed"] == 2);

    // Edit the model (another hidden size): before, --resume mixed both models in one report, exit 0.
    json m = json::parse(read_text(model));
    m["hidden_size"] = m["hidden_size"].get<int>() * 2;
    std::ofstream(model, std::ios::trunc) << m.dump(2);
    for (const auto& s : sweeps) {
        const std::string journal = dir + (s == sweeps[0] ? "/axis.jsonl" : "/fixed.jsonl");
        const size_t before = journal_lines(journal).size();
        expect_exit2(run_cli(s + " --resume"), {journal + ":1", "another model file", "changed"});
        CHECK(journal_lines(journal).size() == before);  // nothing ran
    }
}
