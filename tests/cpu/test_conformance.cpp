// SPDX-License-Identifier: Apache-2.0
// The conformance case list (tests/conformance.py): every tiny model of tests/data/conformance/models/ under every
// variant of tests/data/conformance/cases.json, through run_point with --check, on every backend this build has that
// computes tensors (the registry's: cpu everywhere, cuda where built and a GPU is present). A new backend is covered
// by its row in the registry. tests/dump_check.py runs the same list against the numpy checker.
#include "test_paths.hpp"
#include "backends/registry.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "config/run_config.hpp"
#include "config/model_config.hpp"
#include "harness/runner.hpp"
#include "harness/validate.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

using namespace moebench;

namespace {

const std::string kConformance = std::string(MOEBENCH_TEST_DATA) + "/conformance";

std::vector<std::string> conformance_models() {
    std::vector<std::string> paths;
    for (const auto& e : std::filesystem::directory_iterator(kConformance + "/models"))
        if (e.path().extension() == ".json") paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    return paths;
}

// The backends to run: built, computing tensors (--check needs them), and usable here.
std::vector<std::string> conformance_backends() {
    std::vector<std::string> names;
    for (const KnownBackend& b : known_backends()) {
        if (!b.built || !b.traits.computes_tensors) continue;
        try {
            std::string why;
            (void)make_backend(b.traits.name, &why);
            names.push_back(b.traits.name);
        } catch (const ConfigError& e) {
            WARN("conformance: backend " << b.traits.name << " skipped here: " << e.what());
        }
    }
    return names;
}

}  // namespace

TEST_CASE("conformance: every tiny family model x every variant passes --check on every backend here", "[conformance]") {
    const json cases = load_json_file(kConformance + "/cases.json", 1 << 20);
    const std::vector<std::string> models = conformance_models();
    REQUIRE(models.size() >= 15);  // one per shipped MoE model
    REQUIRE(cases.at("variants").size() >= 5);
    int64_t points = 0, skipped = 0;
    for (const std::string& backend : conformance_backends())
        for (const std::string& model : models) {
            // A backend that does not run the model's forward path (linear attention on cuda) is skipped for it,
            // with the reason it gives a user.
            try {
                const ModelConfig mc = load_model(model);
                check_backend_runs_model(*find_backend_traits(backend), mc, {0, 1});
            } catch (const ConfigError& e) {
                WARN("conformance: " << backend << " skips " << model << ": " << e.what());
                skipped += static_cast<int64_t>(cases.at("variants").size());
                continue;
            }
            for (const json& variant : cases.at("variants")) {
                json j = variant;
                j.erase("name");
                j["model"] = model;
                j["backend"] = backend;
                j["layers"] = 2;
                j["warmup"] = 0;
                j["iters"] = 1;
                j["threads"] = 2;
                j["seed"] = 7;
                j["check"] = true;
                const RunConfig cfg = run_config_from_json(j, "conformance");
                INFO(backend << " " << std::filesystem::path(model).filename().string() << " "
                             << variant.at("name").get<std::string>());
                const json record = run_point(cfg);
                REQUIRE(record.contains("check"));
                INFO("check: " << record["check"].dump());
                CHECK(record["check"].value("passed", false));
                CHECK(record["check"].value("ids_mismatched", -1) == 0);
                ++points;
            }
        }
    CHECK(points + skipped >= static_cast<int64_t>(models.size() * cases.at("variants").size()));
}
