// SPDX-License-Identifier: Apache-2.0
// fuzz_make_seeds ROOT OUT: writes the seed inputs that cannot be referenced in place (scripts/fuzz.sh), one folder
// per reader under OUT. Binary files come from moebench's own writers (write_trace, write_safetensors,
// append_journal), so the seeds follow the formats as they are now; reports are the ones in ROOT/results, shrunk as
// far as `report` still reads them (a fuzzer mutates a 20 kB input far faster than a 1 MB one); JSONL traces are the
// first records of tests/data.
#include "fuzz/readers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using namespace moebench;

namespace {

void put(const fs::path& path, const std::string& bytes) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Traces of a few workloads on two models, with and without weights, several sequences, token ids.
void write_traces(const fs::path& out) {
    int n = 0;
    const auto both = [&](const RoutingTrace& t) {
        const std::string name = fmt::format("seed-{}.safetensors", n++);
        write_trace((out / "trace_safetensors" / name).string(), t);
        fs::create_directories(out / "safetensors");
        fs::copy_file(out / "trace_safetensors" / name, out / "safetensors" / name,
                      fs::copy_options::overwrite_existing);
    };
    const ModelConfig olmoe = load_model("olmoe-1b-7b");
    const ModelConfig tiny = load_model("tests/data/models/tiny-gqa.json");
    for (const char* spec : {"zipf:1.2", "hot:4:0.5", "uniform", "domains:4:0.1", "balanced"}) {
        auto w = make_workload(spec, olmoe, 7, "--routing");
        both(generate_trace(*w, olmoe, {0, 1}, 12, 5));
    }
    auto w = make_workload("zipf:0.8", tiny, 1, "--routing");
    RoutingTrace t = generate_trace(*w, tiny, {0, 1}, 9);
    both(t);
    t.seq_starts = {0, 4, 7};
    t.token_ids = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    t.topk_weights.clear();
    t.topk_ids[3] = -1;
    t.extra_metadata["note"] = "fuzz seed";
    both(t);
}

// A tensor file of every dtype the reader knows, with metadata.
void write_tensor_file(const fs::path& out) {
    TensorFile f;
    const float f32[6] = {0.5f, -1.0f, 2.0f, 0.0f, 1e-3f, 7.0f};
    const int32_t i32[4] = {0, -1, 3, 2147483647};
    const int64_t i64[3] = {0, 4, -5};
    f.tensors.push_back(NamedTensor::f32("router_logits", {2, 3}, f32));
    f.tensors.push_back(NamedTensor::i32("topk_ids", {1, 2, 2}, i32));
    f.tensors.push_back(NamedTensor::i64("seq_starts", {3}, i64));
    NamedTensor bf16{"hidden", "BF16", {2}, {0x80, 0x3f, 0x00, 0x40}};
    f.tensors.push_back(bf16);
    f.metadata = {{"model", "seed"}, {"num_experts", "4"}};
    write_safetensors((out / "safetensors" / "tensors.safetensors").string(), f);
}

// Arrays beyond 8 elements cut to 8: small seeds of the real report shapes.
void shrink_arrays(json& j) {
    if (j.is_array() && j.size() > 8) j.erase(j.begin() + 8, j.end());
    if (j.is_structured())
        for (auto& v : j) shrink_arrays(v);
}

/// True when `reader` takes `bytes` without an error: a seed the strict readers refuse only covers their refusal.
bool reads_cleanly(const char* reader, const std::string& bytes) {
    try {
        fuzz::replay(*fuzz::find_reader(reader), bytes);
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

// The smallest form of a shipped report that `report` still reads: one run with short arrays, all runs with short
// arrays (a sweep block indexes runs[]), or the whole file.
json smallest_readable_report(const fs::path& path) {
    const json whole = json::parse(slurp(path));  // (parsed twice: seeds are made once per fuzz.sh run)
    for (int form = 0; form < 2; ++form) {
        json r = whole;
        if (form == 0 && r.contains("runs") && r["runs"].size() > 1)
            r["runs"].erase(r["runs"].begin() + 1, r["runs"].end());
        shrink_arrays(r);
        if (reads_cleanly("report", r.dump())) return r;
    }
    std::fprintf(stderr, "fuzz_make_seeds: %s is a seed only as a whole (report refuses its shrunk forms)\n",
                 path.string().c_str());
    return whole;
}

void write_reports(const fs::path& root, const fs::path& out) {
    std::vector<json> reports;
    for (const auto& e : fs::directory_iterator(root / "results")) {
        if (e.path().extension() != ".json") continue;
        const json whole = json::parse(slurp(e.path()));
        if (whole.is_object() && whole.value("schema", "") == kReportSchema)  // (results/ also holds bench tables)
            reports.push_back(smallest_readable_report(e.path()));
    }
    std::sort(reports.begin(), reports.end(), [](const json& a, const json& b) { return a.dump() < b.dump(); });
    for (size_t i = 0; i < reports.size(); ++i) {
        put(out / "report" / fmt::format("seed-{}.json", i), reports[i].dump());
        json slower = reports[i];
        for (auto& run : slower["runs"])
            if (run.contains("latency") && run["latency"].contains("step") &&
                run["latency"]["step"].contains("mean_us"))
                run["latency"]["step"]["mean_us"] = run["latency"]["step"]["mean_us"].get<double>() * 1.3;
        put(out / "compare" / fmt::format("seed-{}.txt", i),
            reports[i].dump() + fuzz::detail::kCompareSeparator + slower.dump());
        if (!reports[i].contains("sweep")) continue;
        // The journal such a sweep would have written, complete and with a torn last line.
        const std::string journal = (out / "journal" / fmt::format("seed-{}.jsonl", i)).string();
        fs::create_directories(out / "journal");
        fs::remove(journal);
        for (const auto& rec : reports[i]["runs"]) {
            const json point = rec.value("sweep_point", json::object());
            append_journal(journal, fuzz::journal_fingerprint(), JournalEntry{point_key(point), point, rec});
        }
        std::string text = slurp(journal);
        put(out / "journal" / fmt::format("seed-{}-torn.jsonl", i), text + text.substr(0, text.find('\n') / 2));
    }
}

// The first records of each shipped JSONL trace (whole, they are over 1 MB).
void write_jsonl(const fs::path& root, const fs::path& out) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(root / "tests" / "data" / "traces")) {
        if (e.path().extension() != ".jsonl") continue;
        std::ifstream in(e.path());
        std::string line, text;
        for (int i = 0; i < 48 && std::getline(in, line); ++i) text += line + "\n";
        put(out / "trace_jsonl" / fmt::format("seed-{}.jsonl", n++), text);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: fuzz_make_seeds ROOT OUT\n");
        return 2;
    }
    try {
        const fs::path root = argv[1], out = argv[2];
        write_traces(out);
        write_tensor_file(out);
        write_reports(root, out);
        write_jsonl(root, out);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
