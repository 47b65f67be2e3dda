// SPDX-License-Identifier: Apache-2.0
// Robustness of the Markdown views (report and compare --format md): names and paths that carry HTML, pipes,
// backticks or control characters reach them escaped, never as markup; each failed before its fix.
#include "cli_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "report/formats.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace fs = std::filesystem;
using moebench::test::read_json;
using moebench::test::read_text;
using moebench::test::run_cli;
using moebench::test::temp_dir;
using moebench::test::write_json;
using nlohmann::json;
using namespace moebench;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";

// No raw tag of the hostile names anywhere in a Markdown document (their escaped text is there instead).
void expect_no_raw_html(const std::string& md) {
    INFO(md.substr(0, 3000));
    CHECK(md.find("<script") == std::string::npos);
    CHECK(md.find("<img") == std::string::npos);
    CHECK(md.find("<b>") == std::string::npos);
}

}  // namespace

TEST_CASE("md_cell: HTML as entities, pipes and backslashes escaped, control characters flattened",
          "[robust][formats]") {
    using formats_detail::md_cell;
    CHECK(md_cell("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;");
    CHECK(md_cell("a & b") == "a &amp; b");
    CHECK(md_cell("x|y") == "x\\|y");
    // A backslash of the text must not escape the pipe's escape (`\\|` would end the cell in GFM).
    CHECK(md_cell("x\\|y") == "x\\\\\\|y");
    CHECK(md_cell("two\nlines\r\x1b[31m") == "two lines  [31m");
    CHECK(md_cell("plain-name_1.5") == "plain-name_1.5");
}

TEST_CASE("md_code: a backtick in the text cannot end the code span", "[robust][formats]") {
    using formats_detail::md_code;
    CHECK(md_code("moebench run") == "`moebench run`");
    CHECK(md_code("a ` b") == "``a ` b``");
    CHECK(md_code("``x") == "``` ``x ```");
    CHECK(md_code("run\n\n<img src=x>") == "`run  <img src=x>`");  // a blank line would end the span early
}

TEST_CASE("report --format md: a hostile model name, path label and machine name reach it escaped",
          "[robust][formats][cli]") {
    const std::string dir = temp_dir("trust-md");
    json model = read_json(kTiny);
    model["name"] = "<script>alert(1)</script>";
    const std::string model_path = write_json(dir + "/evil-model.json", model);
    const std::string report_path = dir + "/r.json";
    auto r = run_cli("run --backend sim --model " + model_path + " --layers 1 --batch 2 --warmup 0 --iters 2 --out " +
                     report_path);
    REQUIRE(r.exit_code == 0);
    // What a report file may hold beyond what moebench writes: a trace path in a sweep label, a CPU model string.
    json report = read_json(report_path);
    report["runs"][0]["sweep_label"] = "routing=trace:\"><img src=x onerror=alert(1)>.safetensors";
    report["environment"]["cpu_model"] = "<b>Xeon</b> | 2 cores";
    report["command"] = "moebench run --model `<i>x</i>`";
    write_json(report_path, report);

    r = run_cli("report " + report_path + " --format md -o " + dir + "/r.md");
    REQUIRE(r.exit_code == 0);
    const std::string md = read_text(dir + "/r.md");
    expect_no_raw_html(md);
    CHECK_THAT(md, Catch::Contains("- model: &lt;script&gt;alert(1)&lt;/script&gt;"));
    CHECK_THAT(md, Catch::Contains("trace:\"&gt;&lt;img src=x onerror=alert(1)&gt;.safetensors"));
    CHECK_THAT(md, Catch::Contains("- machine: &lt;b&gt;Xeon&lt;/b&gt; \\| 2 cores"));
    CHECK_THAT(md, Catch::Contains("- command: `` moebench run --model `<i>x</i>` ``"));  // verbatim in its span

    // compare --format md: the report paths (A = ..., B = ...) and the labels.
    const std::string evil_dir = dir + "/\"><img src=x onerror=alert(1)>";
    fs::create_directories(evil_dir);
    fs::copy_file(report_path, evil_dir + "/b.json");
    r = run_cli("compare " + report_path + " '" + evil_dir + "/b.json' --format md -o " + dir + "/c.md");
    INFO(r.err);
    REQUIRE((r.exit_code == 0 || r.exit_code == 1));
    const std::string cmp = read_text(dir + "/c.md");
    expect_no_raw_html(cmp);
    CHECK_THAT(cmp, Catch::Contains("&gt;&lt;img src=x onerror=alert(1)&gt;/b.json"));
}
