// SPDX-License-Identifier: Apache-2.0
// Robustness of what a run, plan or bench is asked through flags and run configs, and of the resources it asks the
// system for: values that cannot apply, cannot fit or overflow, infinite or out-of-range numbers, thread counts
// the system refuses, a tight memory cap. Each is refused up front (exit 2, naming the flag, the value and the
// fix) or ends cleanly, never a crash, a hang or a silent default; each failed before its fix.
#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "common/json_util.hpp"
#include "config/run_config.hpp"
#include "sweep/axes.hpp"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using moebench::test::config_error_of;
using moebench::test::expect_refused;
using moebench::test::expect_refused_bounded;
using moebench::test::expect_refused_one_line;
using moebench::test::fuzz_file;
using moebench::test::read_text;
using moebench::test::run_capped;
using moebench::test::run_cli;
using moebench::test::seconds_since;
using moebench::test::temp_dir;
using moebench::test::wait_exit;
using moebench::test::write_temp;
using namespace moebench;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";
const std::string kMixtral = kData + "/hf-configs/mixtral-8x7b-v0.1.json";

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
            if (key == "Uid:")
                st >> real_uid;
            else if (key == "Threads:")
                st >> threads;
            st.ignore(1 << 20, '\n');
        }
        if (real_uid == static_cast<long>(uid)) n += threads;
    }
    ::closedir(d);
    return n;
}

}  // namespace

TEST_CASE("an EP size that does not divide the experts", "[robust][cli]") {
    expect_refused_one_line("plan --model " + kMixtral + " --ep 3", {"--ep", "3", "1, 2, 4, 8"});
    expect_refused_one_line("plan --model " + kMixtral + " --ep 16", {"--ep", "16"});
}

TEST_CASE("bad flag values", "[robust][cli]") {
    expect_refused_one_line("plan --model " + kMixtral + " --dtype foo", {"--dtype", "foo", "bf16"});
    expect_refused_one_line("plan --model " + kMixtral + " --kv-dtype int3", {"--kv-dtype", "int3"});
    expect_refused_one_line("plan --model " + kMixtral + " --ep 0", {"--ep", "0"});
    expect_refused_one_line("plan --model " + kMixtral + " --tp -2", {"--tp", "-2"});
    expect_refused_one_line("plan --model " + kMixtral + " --batch -1", {"--batch", "-1"});
    expect_refused_one_line("plan --model " + kMixtral + " --batch 2x", {"--batch", "2x"});
    expect_refused_one_line("plan --model " + kMixtral + " --context 0", {"--context", "0"});
    expect_refused_one_line("plan --model " + kMixtral + " --format yaml", {"--format", "yaml"});
    expect_refused_one_line("devices --format yaml", {"--format", "yaml"});
}

TEST_CASE("bench moe --batch 0 / --tokens 0 are refused, not run with the default", "[robust][cli]") {
    const auto t0 = std::chrono::steady_clock::now();
    expect_refused_bounded("bench moe --model " + kTiny + " --batch 0", {"--batch", "0", ">= 1"});
    expect_refused_bounded("bench moe --model " + kTiny + " --tokens 0", {"--tokens", "0", ">= 1"});
    expect_refused_bounded("bench moe --model " + kTiny + " --tokens 100000000", {"--tokens", "100000000"});
    expect_refused_bounded("bench moe --model " + kTiny + " --iters 0", {"--iters"});
    CHECK(seconds_since(t0) < 30);  // refused before any measurement
    // A dense model: the fix names what exists (there is no `plan --list-models`).
    json dense = load_json_file(kTiny);
    dense.erase("moe");
    dense.erase("dense_layers");
    dense["dense_intermediate_size"] = 64;
    const std::string path = write_temp("dense.json", dense.dump());
    auto r = run_cli("bench moe --model " + path);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("no MoE layers") && !Catch::Contains("--list-models"));
}

TEST_CASE("plan exits 2 when the asked batch and context do not fit", "[robust][cli]") {
    auto r = run_cli("plan --model " + kMixtral + " --batch 4096 --context 131072");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("moebench: error: --batch/--context") && Catch::Contains("does not fit") &&
                          Catch::Contains("--batch 4096 --context 131072"));
    // The largest batch it names fits (exit 0, "fits": true), and one more does not.
    const auto at = r.err.find("at most --batch ");
    REQUIRE(at != std::string::npos);
    const int64_t max_batch = std::stoll(r.err.substr(at + 16));
    REQUIRE(max_batch >= 1);
    auto ok = run_cli("plan --model " + kMixtral + " --batch " + std::to_string(max_batch) +
                      " --context 131072 --format json");
    REQUIRE(ok.exit_code == 0);
    CHECK(json::parse(ok.out)["memory"]["fits"] == true);
    CHECK(run_cli("plan --model " + kMixtral + " --batch " + std::to_string(max_batch + 1) + " --context 131072")
              .exit_code == 2);
    // The largest context it names at batch 4096 fits too.
    const auto ctx_at = r.err.find("at most --context ");
    REQUIRE(ctx_at != std::string::npos);
    const std::string max_context = std::to_string(std::stoll(r.err.substr(ctx_at + 18)));
    CHECK(run_cli("plan --model " + kMixtral + " --batch 4096 --context " + max_context).exit_code == 0);
}

TEST_CASE("plan without --batch/--context still prints a plan that does not fit", "[robust][cli]") {
    // A GPU with room for the weights and activations but not the default 4096-token KV cache.
    auto j = run_cli("plan --model " + kMixtral + " --format json");
    REQUIRE(j.exit_code == 0);
    const json mem = json::parse(j.out)["memory"];
    const double bytes = mem["per_gpu"]["weights_bytes"].get<double>() +
                         mem["per_gpu"]["activation_bytes"].get<double>() +
                         0.5 * mem["per_gpu"]["kv_cache_bytes"].get<double>();
    json hw = load_json_file(std::string(MOEBENCH_SOURCE_DIR) + "/configs/hardware/h200-sxm.json");
    hw.erase("memory_gib");
    hw["memory_bytes"] = bytes;
    const std::string path = write_temp("small-gpu.json", hw.dump());
    auto r = run_cli("plan --model " + kMixtral + " --hardware " + path);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("DOES NOT FIT"));
    // Asked explicitly (even at the default values), it is the answer: exit 2.
    expect_refused_bounded("plan --model " + kMixtral + " --hardware " + path + " --batch 1",
                           {"--batch/--context", "does not fit"});
    expect_refused_bounded("plan --model " + kMixtral + " --hardware " + path + " --context 4096", {"does not fit"});
}

TEST_CASE("a command under a tight ulimit -v ends instead of hanging in OpenBLAS's exit handler", "[robust][cli]") {
    // OpenBLAS 0.3.21's workers retry a failed buffer mmap forever and its exit handler joins them; main() ends the
    // process without running library exit handlers (src/main.cpp, finish()). This hung until the 120 s timeout.
    if (kAddressSanitizer) {
        SUCCEED(
            "skipped under ASan: its shadow memory cannot start under ulimit -v, and its builds keep exit handlers");
        return;
    }
    // The cap: 100 MB above the smallest one under which the binary starts at all (its shared libraries, CUDA's and
    // MPI's, map most of a GB of address space, and how much depends on the build), found by bisection.
    int64_t lo = 100'000, hi = 8'000'000;
    while (hi - lo > 10'000) {
        const int64_t mid = (lo + hi) / 2;
        (run_capped("--version", mid).exit_code == 0 ? hi : lo) = mid;
    }
    const std::string dir = temp_dir("ulimit");
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_capped("trace convert " + kData + "/traces/mixtral-8x7b-humaneval.jsonl -o " + dir + "/h.safetensors",
                        hi + 100'000);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(r.err.substr(0, 500));
    CHECK(r.exit_code == 0);
    CHECK(s < 60);
    CHECK(fs::exists(dir + "/h.safetensors"));
}

TEST_CASE("--threads beyond 4096 is refused with exit 2 by run, sweep and bench moe", "[robust][threads][cli]") {
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

TEST_CASE("threads the system refuses (RLIMIT_NPROC): exit 2 naming the limit, within seconds, no hang",
          "[robust][threads][cli]") {
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
    const std::vector<std::string> args = {MOEBENCH_BIN, "run", "--model", kTiny, "--backend", "cpu", "--json", "-",
                                           "--warmup",   "0",   "--iters", "1",   "--threads", "512"};
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

TEST_CASE("mutated run configs load or raise ConfigError only", "[robust][fuzz]") {
    const std::string dir = temp_dir("qa-fuzz");
    const std::string seed_text = read_text(std::string(MOEBENCH_SOURCE_DIR) + "/configs/runs/default.json");
    REQUIRE(!seed_text.empty());
    fuzz_file(seed_text, dir + "/run.json", 200, 11, [](const std::string& p) {
        RunConfig cfg = run_config_from_json(load_json_file(p), p);
        validate(cfg);
    });
    fs::remove_all(dir);
}

TEST_CASE("flags that cannot apply or cannot fit are refused up front", "[robust][cli]") {
    // --seq-len in decode used to be ignored silently.
    expect_refused("run --model " + kTiny + " --seq-len 8 --out -", {"--seq-len", "prefill"});
    // trace info --top-pairs -1 reached std::vector as a huge size (internal error).
    const std::string trace = temp_dir("qa-trace") + "/t.safetensors";
    REQUIRE(run_cli("trace gen --model " + kTiny + " --routing uniform --tokens 16 -o " + trace).exit_code == 0);
    expect_refused("trace info " + trace + " --top-pairs -1", {"--top-pairs", "-1"});
    fs::remove_all(fs::path(trace).parent_path());
    // trace gen of 10^12 tokens used to try the allocation ("out of host memory; ... --batch").
    expect_refused("trace gen --model " + kTiny + " --routing uniform --tokens 1000000000000 -o /tmp/never.st",
                   {"--tokens", "1000000000000"});
    // A 10^10-point sweep grid used to be built (quadratic dedup, then bad_alloc); now refused at once.
    std::vector<SweepAxis> axes{{"batch", parse_axis_values("1..100000:+1", "--batch")},
                                {"context", parse_axis_values("1..100000:+1", "--context")}};
    CHECK_THAT(config_error_of([&] { (void)expand_axes(axes); }), Catch::Contains("100000 points"));
}

TEST_CASE("sizes near INT64_MAX are refused, not a crash or an overflowed plan", "[robust][cli]") {
    const std::string big = "9223372036854775807";
    // Before: segfault (context), "internal error: cannot create std::vector larger than max_size()" (batch).
    expect_refused("run --model " + kTiny + " --context " + big + " --out -", {"context", big});
    expect_refused("run --model " + kTiny + " --batch " + big + " --out -", {"batch", big});
    expect_refused("run --backend sim --model " + kTiny + " --batch " + big + " --out -", {"batch", big});
    // batch x seq_len used to wrap to a negative token count.
    expect_refused("run --model " + kTiny + " --mode prefill --batch 3 --seq-len 3074457345618258603 --out -",
                   {"seq_len"});
    expect_refused("run --model " + kTiny + " --mode prefill --batch 65536 --seq-len 65536 --out -",
                   {"tokens per step", "65536 x 65536"});
    expect_refused("run --model " + kTiny + " --iters 1000000000 --out -", {"iters", "1000000000"});
    // plan: ceil(batch / dp) overflowed; the plan said "fits" with negative KV bytes, exit 0.
    expect_refused("plan --model mixtral-8x7b --batch " + big, {"--batch", big});
    expect_refused("plan --model mixtral-8x7b --context 1000000000000000", {"--context"});
}

TEST_CASE("infinite option values and negative trace seeds are refused", "[robust][cli]") {
    // Before: inf was accepted and the report's resolved config said "capacity_factor": null.
    expect_refused("run --model " + kTiny + " --capacity-factor inf --out -", {"capacity_factor", "inf", "finite"});
    expect_refused("run --model " + kTiny + " --min-time inf --out -", {"min_time_s", "finite"});
    // Before: -1 wrapped to 18446744073709551615.
    expect_refused("trace gen --model " + kTiny + " --routing uniform --tokens 8 --seed -1 -o /tmp/never.safetensors",
                   {"--seed", "-1"});
    CHECK_FALSE(fs::exists("/tmp/never.safetensors"));
    expect_refused("run --model no-such-model --out -", {"unknown model name", "no-such-model"});
    // CLI11's parse errors carry the fix too (before: "Could not convert: --batch = eight" and nothing more).
    expect_refused("run --batch eight", {"--batch", "eight", "whole number", "e.g. 8"});
    // Before: CLI11 saturated these to 2^63 - 1 and the run went on with a value nobody typed; a JSON config
    // wrapped 2^63 to a negative number.
    expect_refused("run --model " + kTiny + " --backend sim --seed 18446744073709551615 --out -",
                   {"--seed", "18446744073709551615", "out of range"});
    expect_refused("run --model " + kTiny + " --backend sim --batch 99999999999999999999 --out -",
                   {"--batch", "99999999999999999999", "out of range"});
    expect_refused("run --config " + write_temp("big-batch.json", R"({"batch": 9223372036854775808})"),
                   {"batch", "9223372036854775808", "out of range"});
    // Before: "--out dir/" ran the whole step, then failed at the write and left dir/ behind.
    const std::string slash_dir = temp_dir("out-slash") + "/new";
    expect_refused("run --model " + kTiny + " --backend sim --out " + slash_dir + "/", {"is a folder"});
    CHECK_FALSE(std::filesystem::exists(slash_dir));
    // Before: the sim allocated routing for 2^26 tokens x 58 layers until bad_alloc (or the OOM killer). (Per token:
    // the statistical path, the default here, holds no per-token state.)
    expect_refused(
        "run --backend sim --model deepseek-v3 --layers 0 --batch 67108864 --iters 1 --warmup 0 "
        "--routing-path per-token --out -",
        {"batch (--batch)", "67108864", "host memory", "fewer --layers"});
    // Before: a newline or a right-to-left override in a model's name went into every report and broke the tables.
    for (const std::string name : {"bad\\nname", "evil\u202Eslug"})
        expect_refused("plan --model " +
                           write_temp("odd-name.json", R"({"moebench": "model/1", "name": ")" + name +
                                                           R"(", "vocab_size": 100, "hidden_size": 64, "num_layers": 2,
            "attention": {"kind": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16},
            "moe": {"num_experts": 8, "top_k": 2, "expert_intermediate_size": 32, "routing": "topk_softmax"}})"),
                       {"name", "printable"});
    // Before: a key given twice silently took the last value.
    expect_refused(
        "run --backend sim --config " + write_temp("dup-key.json", R"({"batch": 8, "mode": "decode", "batch": 0})"),
        {"twice", "batch"});
    // Before: "command: unknown run config field" for a report of another schema version.
    expect_refused("run --config " + write_temp("report-v2.json", R"({"schema": "moebench.report/2", "command": "x"})"),
                   {"moebench.report/2", "run config"});
    // Before: "--ep/--tp: ... use a smaller --dtype or a larger GPU" when only the batch's activations overflowed.
    expect_refused("plan --model olmoe-1b-7b --batch 100000000", {"--batch", "100000000", "use --batch"});
    // Before: an infinite noise band called any slowdown noise, and the gate passed.
    for (const std::string bad : {"--k-sigma inf", "--spread-z inf", "--noise-floor 1e300", "--threshold 1e300"})
        expect_refused("compare never-read-a.json never-read-b.json " + bad,  // options are checked first
                       {bad.substr(0, bad.find(' ')), bad.substr(bad.find(' ') + 1)});
}

TEST_CASE("prefill reports no KV context, and refuses --context", "[robust][cli]") {
    // Before: prefill ignored context but the report (and terminal) carried the default run's 1024.
    const auto r = run_cli("run --model " + kTiny + " --mode prefill --seq-len 4 --iters 1 --warmup 0 --json -");
    REQUIRE(r.exit_code == 0);
    CHECK(json::parse(r.out)["runs"][0]["context"] == 0);
    expect_refused("run --model " + kTiny + " --mode prefill --seq-len 4 --context 100 --out -",
                   {"--context", "prefill", "100"});
}
