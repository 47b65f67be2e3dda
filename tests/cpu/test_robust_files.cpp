// SPDX-License-Identifier: Apache-2.0
// Robustness of the paths moebench reads from and writes to: an input path that is a device, a FIFO, a link loop, a
// folder or unreadable; an output that cannot be written, is a link or a pipe, is one of the inputs, or is steered
// by a report; stdout that is full; temporaries of dead writers. Each is named as what it is (exit 2) before any
// work, or written through, never a hang, a destroyed input or output lost silently; each failed before its fix.
#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/json_util.hpp"
#include "common/read_file.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace fs = std::filesystem;
using moebench::test::config_error_of;
using moebench::test::expect_exit2;
using moebench::test::expect_refused;
using moebench::test::expect_refused_bounded;
using moebench::test::read_text;
using moebench::test::run_cli;
using moebench::test::run_prefixed;
using moebench::test::seconds_since;
using moebench::test::sim_sweep;
using moebench::test::temp_dir;
using moebench::test::write_temp;
using namespace moebench;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";
const std::string kMixtral = kData + "/hf-configs/mixtral-8x7b-v0.1.json";

}  // namespace

TEST_CASE("devices, FIFOs and link loops are named as such, and never read", "[robust][cli]") {
    const std::string dir = temp_dir("kinds");
    const std::string fifo = dir + "/pipe.json", loop_a = dir + "/a.json", loop_b = dir + "/b.json";
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    fs::create_symlink(loop_b, loop_a);
    fs::create_symlink(loop_a, loop_b);
    const std::string dangling = dir + "/dangling.json";
    fs::create_symlink(dir + "/missing.json", dangling);
    const auto t0 = std::chrono::steady_clock::now();  // a FIFO without a writer blocked the reader forever
    expect_refused_bounded("plan --model /dev/zero", {"--model", "/dev/zero", "character device"});
    expect_refused_bounded("plan --model " + fifo, {"--model", fifo, "FIFO"});
    expect_refused_bounded("plan --model " + loop_a, {"--model", loop_a, "too many levels of symbolic links"});
    expect_refused_bounded("plan --model " + dangling, {"--model", dangling, "symbolic link to a missing file"});
    expect_refused_bounded("plan --model " + kMixtral + " --hardware " + fifo, {"--hardware", fifo, "FIFO"});
    expect_refused_bounded("trace info /dev/zero", {"/dev/zero", "character device"});
    expect_refused_bounded("trace info " + fifo, {fifo, "FIFO"});
    expect_refused_bounded("trace convert " + fifo + " -o " + dir + "/o.safetensors", {fifo, "FIFO"});
    expect_refused_bounded("run --model " + kTiny + " --routing trace:" + fifo + " --out -", {fifo, "FIFO"});
    expect_refused_bounded("report " + loop_a, {loop_a, "symbolic links"});
    // Before: place opened the FIFO and waited for a writer forever; a folder was "internal error", exit 1.
    expect_refused_bounded("place --trace " + fifo + " --ep 2 -o " + dir + "/p.json", {"--trace", fifo, "FIFO"});
    expect_refused_bounded("place --trace " + dir + " --ep 2 -o " + dir + "/p.json", {"--trace", dir, "folder"});
    CHECK(seconds_since(t0) < 30);
    fs::remove_all(dir);
}

TEST_CASE("an unreadable file is 'permission denied', not 'No such file'", "[robust][cli]") {
    const std::string dir = temp_dir("perm");
    fs::permissions(dir, fs::perms::all);  // others may enter the folder, not read the file
    const std::string path = dir + "/config.json";
    std::ofstream(path) << moebench::test::read_text(kMixtral);
    fs::permissions(path, fs::perms::none);
    const std::string args = "plan --model " + path;
    test::CliResult r;
    if (::geteuid() == 0) {
        // root reads any file: run as nobody. Where setpriv cannot switch users (a restricted container), skip.
        if (std::system("setpriv --reuid=65534 --regid=65534 --clear-groups true >/dev/null 2>&1") != 0) {
            WARN("skipped: running as root and setpriv cannot switch to an unprivileged user here");
            return;
        }
        r = run_prefixed("exec setpriv --reuid=65534 --regid=65534 --clear-groups", args);
    } else {
        r = run_cli(args);
    }
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(path) && Catch::Contains("permission denied"));
    CHECK_THAT(r.err, !Catch::Contains("No such file") && !Catch::Contains("not found"));
    fs::permissions(path, fs::perms::owner_all);
    fs::remove_all(dir);
}

TEST_CASE("path errors name the real problem in the library too", "[robust]") {
    CHECK_THAT(config_error_of([] { require_readable_file("/dev/null"); }), Catch::Contains("character device"));
    CHECK_THAT(config_error_of([] { require_readable_file("/no/such/file.json"); }), Catch::Contains("file not found"));
    CHECK_THAT(config_error_of([] { require_readable_file("/etc/passwd/x"); }), Catch::Contains("not a folder"));
    CHECK_THAT(config_error_of([] { require_readable_file("/tmp"); }), Catch::Contains("folder"));
    CHECK_THAT(config_error_of([] { require_readable_file("/dev/null", "--model"); }),
               Catch::StartsWith("--model: ") && Catch::Contains("/dev/null"));
    CHECK(config_error_of([] { require_readable_file(kTiny); }).empty());
}

TEST_CASE("stale <target>.tmp.<pid> files of dead writers are removed", "[robust]") {
    const std::string dir = temp_dir("tmp");
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    REQUIRE(child > 0);
    ::waitpid(child, nullptr, 0);  // a pid that no longer runs: the writer killed mid-write
    const std::string target = dir + "/report.json";
    const std::string dead = target + ".tmp." + std::to_string(child), alive = target + ".tmp.1",
                      other = dir + "/other.json.tmp." + std::to_string(child);
    for (const auto& p : {dead, alive, other}) std::ofstream(p) << "half";
    write_file_atomic(target, "{}");
    CHECK(moebench::test::read_text(target) == "{}");
    CHECK_FALSE(fs::exists(dead));
    CHECK(fs::exists(alive));  // pid 1 runs: perhaps a writer of the same file, mid-write
    CHECK(fs::exists(other));  // another target's temporary is not ours to judge
    fs::remove_all(dir);
}

TEST_CASE("output folders are not created for a run refused on its inputs", "[robust][cli]") {
    const std::string dir = temp_dir("outdir");
    expect_refused_bounded("run --model " + dir + "/missing.json --out " + dir + "/new/sub/r.json", {"missing.json"});
    CHECK_FALSE(fs::exists(dir + "/new"));
    expect_refused_bounded("run --model " + kTiny + " --routing zipf:-1 --out " + dir + "/new2/r.json", {"zipf"});
    CHECK_FALSE(fs::exists(dir + "/new2"));
    check_output_path(dir + "/a/b/c.json");  // checks that the folders can be made, and leaves none
    CHECK_FALSE(fs::exists(dir + "/a"));
    CHECK_THAT(config_error_of([&] { check_output_path(kTiny + "/x.json"); }), Catch::Contains("folder"));
    // And a run that succeeds makes them.
    auto r = run_cli("run --model " + kTiny + " --iters 1 --warmup 0 --out " + dir + "/ok/r.json");
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(fs::exists(dir + "/ok/r.json"));
    fs::remove_all(dir);
}

TEST_CASE("a folder where a file is expected is a ConfigError", "[robust][cli]") {
    const std::string dir = temp_dir("qa-dir");
    const std::string sub = dir + "/x.json";
    fs::create_directories(sub);
    expect_refused("trace info " + sub, {sub, "folder"});    // was: internal error, exit 1
    expect_refused("plan --model " + sub, {sub, "folder"});  // was: "file not found"
    expect_refused("report " + sub, {sub, "folder"});        // was: "is not valid JSON"
    expect_refused("trace convert " + sub + " -o " + dir + "/o.safetensors", {sub, "folder"});
    fs::remove_all(dir);
}

TEST_CASE("outputs that cannot be written fail before the work, and leave no temporary file", "[robust][cli]") {
    const std::string dir = temp_dir("qa-out");
    const std::string folder = dir + "/out.json";
    fs::create_directories(folder);
    const auto t0 = std::chrono::steady_clock::now();
    expect_refused("run --model " + kTiny + " --iters 1000 --warmup 0 --out " + folder, {folder, "folder"});
    // 1000 iterations take seconds; the refusal comes before the run.
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5.0);
    const std::string file = dir + "/a-file";
    std::ofstream(file) << "x";
    expect_refused("run --model " + kTiny + " --iters 1 --warmup 0 --out " + dir + "/r.json --dump-tensors " + file,
                   {"--dump-tensors", file});
    CHECK_THAT(config_error_of([&] { write_file_atomic(folder, "x"); }), Catch::Contains("folder"));
    size_t leftovers = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.path().string().find(".tmp.") != std::string::npos) ++leftovers;
    CHECK(leftovers == 0);
    CHECK_THAT(config_error_of([] { check_output_path("/proc/no-such-dir/x.json"); }),
               Catch::Contains("/proc/no-such-dir/x.json"));
    fs::remove_all(dir);
}

TEST_CASE("an output path that is a symbolic link or a named pipe is written through, never replaced",
          "[robust][cli]") {
    // Before: the temporary file was renamed over the path, so a link became a regular file (its target never
    // written) and a device such as /dev/null would have been replaced by a file.
    const std::string dir = temp_dir("qa-special-out");
    const std::string target = dir + "/real/r.json", link = dir + "/link.json";
    fs::create_directories(dir + "/real");
    fs::create_symlink("real/r.json", link);  // relative, dangling until written
    write_file_atomic(link, "{}\n");
    CHECK(fs::is_symlink(fs::symlink_status(link)));
    CHECK(read_text(target) == "{}\n");

    const std::string fifo = dir + "/pipe";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string received;
    std::thread reader([&] { received = read_text(fifo); });  // opening for reading waits for the writer
    write_file_atomic(fifo, "through the pipe\n");
    reader.join();
    CHECK(received == "through the pipe\n");
    CHECK(fs::is_fifo(fs::status(fifo)));
    check_output_path(fifo);  // a writable special file is a valid --out
    fs::remove_all(dir);
}

TEST_CASE("a report that cannot reach stdout is an error, and --json - with --out is refused", "[robust][cli]") {
    if (!fs::exists("/dev/full")) {
        WARN("skipped: no /dev/full here");
        return;
    }
    const std::string dir = temp_dir("qa-stdout");
    const std::string cmd = std::string(MOEBENCH_BIN) + " run --model " + kTiny +
                            " --iters 1 --warmup 0 --json - >/dev/full 2>" + dir + "/err";
    const int status = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);  // before: 0, the report lost silently (exit 1 since: a failed write, as any)
    CHECK_THAT(read_text(dir + "/err"),
               Catch::Contains("moebench: error: writing to stdout failed: No space left on device"));
    // Before: --out was ignored silently when --json - was given too.
    expect_refused("run --model " + kTiny + " --iters 1 --json - --out " + dir + "/r.json", {"--json", "--out"});
    CHECK_FALSE(fs::exists(dir + "/r.json"));
    fs::remove_all(dir);
}

TEST_CASE("a command whose stdout is a full device exits 1 with the reason", "[robust][stdout][cli]") {
    if (!fs::exists("/dev/full")) {
        WARN("skipped: no /dev/full here");
        return;
    }
    const std::string dir = temp_dir("dev-full");
    const std::string report = dir + "/r.json", trace = dir + "/t.safetensors";
    REQUIRE(run_cli(sim_sweep(kTiny, "1,2", report)).exit_code == 0);
    REQUIRE(run_cli("trace gen --model " + kTiny + " --routing zipf:1.2 --tokens 64 -o " + trace).exit_code == 0);
    // Before: every one of these exited 0 with its output lost.
    for (const std::string& args : std::vector<std::string>{
             "report " + report + " --format md", "report " + report + " -o -", "report " + report + " --format csv",
             "run --model " + kTiny + " --backend sim --warmup 0 --iters 2 --out " + dir + "/run.json --format csv",
             std::string("plan"), "trace info " + trace, "compare " + report + " " + report + " --format json",
             // the sweep's summary table (not --quiet)
             "sweep --backend sim --model " + kTiny + " --warmup 0 --iters 2 --context 64 --batch 1,2 --out " + dir +
                 "/s.json",
             "devices"}) {
        INFO(args);
        const std::string cmd = std::string(MOEBENCH_BIN) + " " + args + " >/dev/full 2>" + dir + "/err";
        const int status = std::system(cmd.c_str());
        const std::string err = read_text(dir + "/err");
        INFO(err);
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 1);
        CHECK_THAT(err, Catch::Contains("moebench: error: writing to stdout failed: No space left on device"));
    }
    // A command with nothing for stdout is not failed by it.
    const std::string quiet =
        std::string(MOEBENCH_BIN) + " report " + report + " -o " + dir + "/v.md >/dev/full 2>/dev/null";
    CHECK(WEXITSTATUS(std::system(quiet.c_str())) == 0);
}

TEST_CASE("an output naming one of the inputs is refused before it is destroyed", "[robust][same_file][cli]") {
    const std::string dir = temp_dir("same-file");
    const std::string model = dir + "/m.json";
    fs::copy_file(kTiny, model);
    const std::string report = dir + "/r.json", b = dir + "/b.json";
    REQUIRE(run_cli("run --model " + model + " --backend sim --warmup 0 --iters 2 --out " + report).exit_code == 0);
    REQUIRE(run_cli("run --model " + model + " --backend sim --warmup 0 --iters 2 --out " + b).exit_code == 0);
    const std::string recording = dir + "/g.jsonl";
    {
        std::ifstream in(kData + "/traces/mixtral-8x7b-gsm8k.jsonl");
        std::ofstream out(recording);
        std::string line;
        for (int i = 0; i < 40 && std::getline(in, line); ++i) out << line << "\n";
    }
    const std::string trace = dir + "/t.safetensors";
    REQUIRE(run_cli("trace gen --model " + kTiny + " --routing zipf:1.2 --tokens 64 -o " + trace).exit_code == 0);
    const std::string sweep_config = dir + "/s.json";
    std::ofstream(sweep_config) << json{{"model", model}, {"backend", "sim"}, {"warmup", 0}, {"iters", 2}}.dump();
    fs::create_symlink(report, dir + "/link.json");

    struct Case {
        std::string args, input;
        std::vector<std::string> flags;
    };
    // Before: each destroyed its input and exited 0.
    const std::vector<Case> cases = {
        {"trace convert " + recording + " -o " + recording, recording, {"-o", "IN"}},
        {"place --trace " + trace + " --ep 2 -o " + trace, trace, {"-o", "--trace"}},
        {"sweep --config " + sweep_config + " --batch 1 --quiet --out " + sweep_config,
         sweep_config,
         {"--out", "--config"}},
        {"run --model " + model + " --backend sim --out " + model, model, {"--out", "--model"}},
        {"run --config " + report + " --out " + report, report, {"--out", "--config"}},
        {"run --config " + report + " --json " + report, report, {"--json", "--config"}},
        {"compare " + report + " " + b + " -o " + report, report, {"-o", "A"}},
        {"compare " + report + " " + b + " -o " + b, b, {"-o", "B"}},
        {"report " + report + " -o " + report, report, {"-o", "REPORT"}},
        {"report " + report + " --format md -o " + dir + "/link.json", report, {"-o", "REPORT"}},  // a link to it
        {"plan --model " + model + " --out " + model, model, {"--out", "--model"}},
        {"sweep --model " + model + " --backend sim --batch 1 --quiet --out " + dir + "/x.json --journal " + model,
         model,
         {"--journal", "--model"}},
    };
    for (const Case& c : cases) {
        const std::string before = read_text(c.input);
        const auto r = run_cli(c.args);
        INFO(c.args);
        std::vector<std::string> needles = {c.flags[0] + ": is the same file as the input " + c.flags[1],
                                            "give " + c.flags[0] + " another path"};
        expect_exit2(r, needles);
        CHECK(read_text(c.input) == before);
    }
    // The report and the journal of a sweep are two files.
    expect_exit2(run_cli("sweep --model " + model + " --backend sim --batch 1 --quiet --out " + dir +
                         "/y.json --journal " + dir + "/y.json"),
                 {"--journal: is the same file as the report (--out)"});
    CHECK_FALSE(fs::exists(dir + "/y.json"));
}

TEST_CASE("same_file follows links and tells files apart", "[robust][same_file]") {
    const std::string dir = temp_dir("same-file-unit");
    std::ofstream(dir + "/a") << "a";
    std::ofstream(dir + "/b") << "a";
    fs::create_symlink(dir + "/a", dir + "/link");
    fs::create_hard_link(dir + "/a", dir + "/hard");
    CHECK(moebench::same_file(dir + "/a", dir + "/link"));
    CHECK(moebench::same_file(dir + "/hard", dir + "/./a"));
    CHECK_FALSE(moebench::same_file(dir + "/a", dir + "/b"));  // equal bytes, two files
    CHECK_FALSE(moebench::same_file(dir + "/a", dir + "/missing"));
    CHECK_FALSE(moebench::same_file("-", "-"));
    CHECK_FALSE(moebench::same_file("/dev/null", "/dev/null"));  // not a file an output could destroy
}

TEST_CASE("run --config REPORT takes neither the report's out nor its dump_tensors", "[robust][run_report][cli]") {
    const std::string dir = temp_dir("report-steers");
    const std::string report = dir + "/r.json";
    REQUIRE(run_cli("run --model " + kTiny + " --backend cpu --warmup 0 --iters 1 --out " + report).exit_code == 0);
    // A report from someone else, naming where to write.
    json doc = json::parse(read_text(report));
    doc["config"]["run"]["dump_tensors"] = dir + "/planted/deep";
    doc["config"]["run"]["out"] = dir + "/planted.json";
    const std::string handed = dir + "/handed.json";
    std::ofstream(handed) << doc.dump(2);
    auto r = run_cli("run --config " + handed + " --json -");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_FALSE(fs::exists(dir + "/planted"));  // before: created, with moe_layer.safetensors in it
    CHECK_FALSE(fs::exists(dir + "/planted.json"));
    CHECK_THAT(r.err, Catch::Contains("its output paths (out, dump_tensors) are not taken"));
    const json rerun = json::parse(r.out);
    CHECK(rerun["config"]["run"]["dump_tensors"] == "");
    // The caller may still ask for a dump.
    auto asked = run_cli("run --config " + handed + " --json - --dump-tensors " + dir + "/mine");
    INFO(asked.err);
    CHECK(asked.exit_code == 0);
    CHECK(fs::exists(dir + "/mine/moe_layer.safetensors"));
}
