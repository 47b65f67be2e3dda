// SPDX-License-Identifier: Apache-2.0
// Issue 14, end to end: one sweep per journal (a second one refuses), a stopped sweep exits non-zero with a journal
// that --resume finishes, no output folder before the config is valid, and thread counts the system cannot give.
#include "test_paths.hpp"
#include "cli_helpers.hpp"

#include <catch2/catch.hpp>
#include <dirent.h>
#include <grp.h>
#include <nlohmann/json.hpp>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

using nlohmann::json;
using moebench::test::read_text;
using moebench::test::run_cli;
using moebench::test::temp_dir;

namespace {

const std::string kTiny = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";

std::vector<json> journal_lines(const std::string& path) {
    std::vector<json> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        try {
            out.push_back(json::parse(line));
        } catch (const json::parse_error&) {
            // a torn last line is allowed right after a kill
        }
    }
    return out;
}

// 12 points of >= `point_s` seconds each, so that a signal or a second sweep lands mid-sweep.
std::vector<std::string> sweep_args(const std::string& dir, double point_s) {
    return {MOEBENCH_BIN, "sweep", "--model", kTiny, "--backend", "cpu", "--batch", "1..8", "--context", "0,16,32",
            "--set", "warmup=1", "--set", "iters=3", "--set", "min_time_s=" + std::to_string(point_s),
            "--set", "max_iters=1000000",  // min_time_s is bounded by max_iters (1000 of ~20 us by default)
            "--out", dir + "/sweep.json", "--journal", dir + "/sweep.jsonl", "--quiet"};
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

// Waits for the process to end; SIGKILLs it (and returns false) after `limit`.
bool wait_exit(pid_t pid, int* status, std::chrono::seconds limit) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < limit) {
        if (::waitpid(pid, status, WNOHANG) == pid) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, status, 0);
    return false;
}

}  // namespace

TEST_CASE("a second sweep on a journal in use refuses, naming the journal and the other process",
          "[hardening][sweep_lock][cli]") {
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
          "[hardening][sweep_signal][cli]") {
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

TEST_CASE("a SIGKILLed sweep leaves no lock that blocks --resume", "[hardening][sweep_lock][cli]") {
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

TEST_CASE("sweep creates no output folder before its config is valid", "[hardening][sweep_outputs][cli]") {
    const std::string dir = temp_dir("outputs");
    const std::string out = dir + "/new/deeper/sweep.json";
    const std::string journal_dir = dir + "/journals";
    const std::string base = "sweep --model " + kTiny + " --backend cpu --quiet --out " + out + " --journal " +
                             journal_dir + "/j.jsonl ";
    for (const std::string bad : {"--batch 1,0", "--batch 1,2 --knee 2", "--batch 1,2 --time-budget -1",
                                  "--batch 1,2 --time-budget nan", "--batch 1,2 --format nope",
                                  "--batch 1,2 --threads 100000"}) {
        auto r = run_cli(base + bad);
        INFO(bad << "\n" << r.err);
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::StartsWith("moebench: error: "));
        CHECK_FALSE(std::filesystem::exists(dir + "/new"));
        CHECK_FALSE(std::filesystem::exists(journal_dir));
    }
}

TEST_CASE("--threads beyond 4096 is refused with exit 2 by run, sweep and bench moe", "[hardening][threads][cli]") {
    const std::string dir = temp_dir("threads");
    for (const std::string& cmd :
         {"run --model " + kTiny + " --backend cpu --json - --threads 100000",
          "sweep --model " + kTiny + " --backend cpu --quiet --out " + dir + "/s.json --threads 100000",
          "bench moe --model " + kTiny + " --tokens 4 --threads 100000"}) {
        auto r = run_cli(cmd);
        INFO(cmd << "\n" << r.err);
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::Contains("threads"));
        CHECK_THAT(r.err, Catch::Contains("4096"));
        CHECK_THAT(r.err, Catch::Contains("100000"));
    }
}

namespace {

// Tasks (threads) owned by `uid`: what RLIMIT_NPROC counts.
long tasks_of_uid(uid_t uid) {
    long n = 0;
    DIR* d = ::opendir("/proc");
    if (!d) return -1;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        std::ifstream st(std::string("/proc/") + e->d_name + "/status");
        std::string key;
        long real_uid = -1, threads = 0;
        while (st >> key) {
            if (key == "Uid:") st >> real_uid;
            else if (key == "Threads:") st >> threads;
            st.ignore(1 << 20, '\n');
        }
        if (real_uid == static_cast<long>(uid)) n += threads;
    }
    ::closedir(d);
    return n;
}

}  // namespace

TEST_CASE("threads the system refuses (RLIMIT_NPROC): exit 2 naming the limit, within seconds, no hang",
          "[hardening][threads][cli]") {
    // Root ignores RLIMIT_NPROC, so as root the child becomes nobody first.
    const bool root = ::geteuid() == 0;
    const passwd* nobody = root ? ::getpwnam("nobody") : nullptr;
    if (root && !nobody) {
        WARN("skipped: running as root and there is no user nobody to drop to, so RLIMIT_NPROC cannot bite");
        return;
    }
    const uid_t uid = root ? nobody->pw_uid : ::getuid();
    const long owned = tasks_of_uid(uid);
    REQUIRE(owned >= 0);
    const rlim_t limit = static_cast<rlim_t>(owned + 24);  // the process and a few threads, far below 512
    const std::string dir = temp_dir("nproc");
    ::chmod(dir.c_str(), 0777);
    const std::string err_path = dir + "/err";
    const std::vector<std::string> args = {MOEBENCH_BIN, "run", "--model", kTiny, "--backend", "cpu",
                                           "--json", "-", "--warmup", "0", "--iters", "1", "--threads", "512"};
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        (void)!::freopen(err_path.c_str(), "w", stderr);
        (void)!::freopen("/dev/null", "w", stdout);
        if (root && (::setgroups(0, nullptr) != 0 || ::setgid(nobody->pw_gid) != 0 || ::setuid(uid) != 0)) ::_exit(125);
        const rlimit rl{limit, limit};
        if (::setrlimit(RLIMIT_NPROC, &rl) != 0) ::_exit(126);
        ::setenv("OPENBLAS_NUM_THREADS", "1", 1);  // OpenBLAS's own threads would take the budget at load time
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int status = 0;
    const bool ended = wait_exit(pid, &status, std::chrono::seconds(30));
    const std::string err = read_text(err_path);
    INFO(err);
    REQUIRE(ended);  // no hang
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) != 125);
    REQUIRE(WEXITSTATUS(status) != 126);
    if (WEXITSTATUS(status) == 0) {
        WARN("skipped: RLIMIT_NPROC was not enforced here (a capability overrides it); every thread was started");
        return;
    }
    CHECK(WEXITSTATUS(status) == 2);
    CHECK_THAT(err, Catch::StartsWith("moebench: error: --threads: the system refused to start thread "));
    CHECK_THAT(err, Catch::Contains("ulimit -u) " + std::to_string(limit)));
    CHECK_THAT(err, Catch::Contains("or fewer, or raise the limit"));
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
}

TEST_CASE("a sweep block of the wrong shape is exit 2 naming the key, not a JSON type error",
          "[hardening][sweep_outputs][cli]") {
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

TEST_CASE("a valid sweep makes the folders of its report and journal", "[hardening][sweep_outputs][cli]") {
    const std::string dir = temp_dir("folders");
    const std::string out = dir + "/a/b/s.json", journal = dir + "/j/k/s.jsonl";
    auto r = run_cli("sweep --model " + kTiny + " --backend cpu --batch 1,2 --set warmup=0 --set iters=1 --quiet --out " +
                     out + " --journal " + journal);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(std::filesystem::exists(out));
    CHECK(journal_lines(journal).size() == 2);
    CHECK_FALSE(std::filesystem::exists(journal + ".lock"));
}

TEST_CASE("--resume refuses a journal whose reused record is corrupt, naming the line's field",
          "[hardening][sweep_resume][cli]") {
    const std::string dir = temp_dir("corrupt");
    const std::string out = dir + "/s.json", journal = dir + "/s.jsonl";
    const std::string base = "sweep --model " + kTiny + " --backend cpu --set warmup=0 --set iters=1 --quiet --out " + out +
                             " --journal " + journal;
    REQUIRE(run_cli(base + " --batch 1,2").exit_code == 0);
    // A hand-edited journal: the first point's step mean becomes text. Before, it went into the report and the
    // golden-point analysis unchecked (a JSON type error, exit 1, after the sweep).
    std::vector<json> lines = journal_lines(journal);
    REQUIRE(lines.size() == 2);
    lines[0]["record"]["latency"]["step"]["mean_us"] = "fast";
    {
        std::ofstream o(journal);
        for (const json& l : lines) o << l.dump() << "\n";
    }
    auto r = run_cli(base + " --batch 1,2,4 --resume");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("latency.step.mean_us") != std::string::npos);
    CHECK(r.err.find("s.jsonl") != std::string::npos);
}

TEST_CASE("a deeply nested --set value or journal line never reaches the JSON parser's recursion",
          "[hardening][sweep_resume][cli]") {
    const std::string dir = temp_dir("deepset");
    // 30000 levels: as deep as one command-line argument can be (128 KiB).
    const std::string value = moebench::test::write_temp("deep.txt", std::string(30000, '[') + std::string(30000, ']'));
    // As a --set value it is text (not JSON), so the field's own check refuses it.
    auto r = run_cli("sweep --model " + kTiny + " --backend cpu --batch 1 --quiet --out " + dir + "/s.json --set \"iters=$(cat " +
                     value + ")\"");
    INFO(r.err.substr(0, 300));
    CHECK(r.exit_code == 2);
    // As a journal line: exit 2 naming the line.
    const std::string journal = dir + "/j.jsonl";
    std::ofstream(journal) << std::string(100000, '[') << std::string(100000, ']') << "\n";
    r = run_cli("sweep --model " + kTiny + " --backend cpu --batch 1 --quiet --out " + dir + "/s2.json --journal " + journal +
                " --resume");
    INFO(r.err.substr(0, 300));
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("nested too deeply") != std::string::npos);
}

TEST_CASE("sim parameters of a hardware profile are bounded: 1e300 us or an efficiency of 1e-300 is exit 2",
          "[hardening][sim][cli]") {
    std::string profile = read_text(std::string(MOEBENCH_SOURCE_DIR) + "/configs/hardware/h200-sxm.json");
    json hw = json::parse(profile);
    for (const auto& [key, value] : std::vector<std::pair<std::string, double>>{
             {"phase_overhead_us", 1e300}, {"a2a_latency_us", 2e6}, {"compute_efficiency", 1e-300}}) {
        json h = hw;
        h["sim"] = {{key, value}};
        const std::string path = moebench::test::write_temp("hw.json", h.dump());
        auto r = run_cli("run --backend sim --hardware " + path + " --model " + kTiny + " --json -");
        INFO(key << ": " << r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.err.find("sim." + key) != std::string::npos);
    }
}
