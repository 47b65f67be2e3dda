// SPDX-License-Identifier: Apache-2.0
#include "harness/rank_settings.hpp"

#include "comm/communicator.hpp"
#include "common/content_hash.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "config/run_fields.hpp"
#include "workload/routing_spec.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <set>

namespace moebench {

namespace {

// Each rank's own (threads: its cores; out and the dump folder: rank 0 alone writes; rank_timeout: its patience) or
// rank 0's alone (the stop rule: rank 0 decides after each step and broadcasts it).
const std::set<std::string> kPerRankFields = {"out",       "threads",    "rank_timeout", "iters",
                                              "max_iters", "min_time_s", "max_noise"};

// The content of a trace file ("unreadable" when it cannot be opened: the workload then names the error).
std::string file_digest(const std::string& path) {
    const std::string digest = file_fnv1a64_hex(path);
    return digest.empty() ? "unreadable" : digest;
}

// "batch (--batch)" for a run field's key.
std::string label_of(const std::string& key) { return run_field_label("", key); }

std::string brief(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The first place where two JSON values differ: "hidden_size: 128 vs 64" inside objects (a "name" first, then the
// keys in order), "A vs B" elsewhere.
std::string first_difference(const json& theirs, const json& ours, const std::string& at) {
    if (theirs.is_object() && ours.is_object()) {
        std::vector<std::string> keys;
        if (theirs.contains("name") || ours.contains("name")) keys.push_back("name");
        for (const auto& [k, v] : ours.items()) keys.push_back(k);
        for (const auto& [k, v] : theirs.items()) keys.push_back(k);
        for (const std::string& k : keys) {
            const json a = theirs.contains(k) ? theirs[k] : json("(none)");
            const json b = ours.contains(k) ? ours[k] : json("(none)");
            if (a != b) return first_difference(a, b, at.empty() ? k : at + "." + k);
        }
    }
    return fmt::format("{}{} vs {}", at.empty() ? "" : at + " ", brief(theirs), brief(ours));
}

}  // namespace

json rank_settings(const RunConfig& cfg, const ModelConfig& model, const ExpertPlacement& placement) {
    json out = json::array();
    const json fields = run_fields_json(cfg, false);
    for (const RunField& f : run_fields()) {
        if (kPerRankFields.count(f.key)) continue;
        json entry = {{"key", f.key}, {"value", fields.at(f.key)}};
        if (f.key == "model") {
            entry["value"] = model_to_json(model);  // the shapes: one path may hold other files on other hosts
        } else if (f.key == "routing") {
            const RoutingSpec spec = parse_routing_spec(cfg.routing, label_of("routing"));
            if (spec.kind == WorkloadKind::trace) {
                const std::string digest = file_digest(spec.trace_path);
                entry["value"] = "trace with content fnv1a64 " + digest;
                entry["shown"] = fmt::format("{} (content fnv1a64 {})", cfg.routing, digest);
            }
        } else if (f.key == "placement") {
            entry["value"] = placement.experts_on_rank;
            entry["shown"] = fmt::format("{} {}", placement.source, json(placement.experts_on_rank).dump());
        } else if (f.key == "dump_tensors") {
            entry["value"] = !cfg.dump_tensors.empty();
            entry["shown"] = cfg.dump_tensors.empty() ? "not given" : "given";
        }
        out.push_back(std::move(entry));
    }
    return out;
}

std::string settings_difference(const json& rank0, const json& theirs, int64_t rank) {
    for (size_t i = 0; i < theirs.size() || i < rank0.size(); ++i) {
        if (i >= theirs.size() || i >= rank0.size())
            return fmt::format("rank {} has {} settings, rank 0 {} (different moebench builds?)", rank, theirs.size(),
                               rank0.size());
        const json &a = theirs[i], &b = rank0[i];
        const std::string key = b.at("key").get<std::string>();
        if (a.at("key") != b.at("key"))
            return fmt::format(
                "rank {} differs from rank 0 in which settings it has: {} vs {} (different moebench "
                "builds?)",
                rank, brief(a.at("key")), key);
        if (a.at("value") == b.at("value")) continue;
        const std::string what = a.contains("shown") && b.contains("shown")
                                     ? fmt::format("{} vs {}", brief(a["shown"]), brief(b["shown"]))
                                     : first_difference(a.at("value"), b.at("value"), "");
        return fmt::format("rank {} differs from rank 0 in {}: {}", rank, label_of(key), what);
    }
    return "";
}

void agree_on_settings(Communicator& comm, const json& settings) {
    const std::string mine = settings.dump();
    const auto hash = static_cast<int64_t>(fnv1a64(mine.data(), mine.size()));
    const std::vector<int64_t> hashes =
        comm.exchange_counts(std::vector<int64_t>(static_cast<size_t>(comm.world_size()), hash));
    int64_t first = -1, num_differing = 0;
    for (int64_t r = 1; r < comm.world_size(); ++r)
        if (hashes[static_cast<size_t>(r)] != hashes[0]) {
            if (first < 0) first = r;
            ++num_differing;
        }
    if (first < 0) return;
    // Every rank learns the same difference and throws the same error (each then exits 2 with it).
    const std::string rank0 = broadcast_string(comm, comm.rank() == 0 ? mine : std::string(), 0);
    const std::string theirs = broadcast_string(comm, comm.rank() == first ? mine : std::string(), first);
    std::string diff = settings_difference(json::parse(rank0), json::parse(theirs), first);
    if (diff.empty()) diff = fmt::format("rank {} differs from rank 0 in its settings' hash", first);
    if (num_differing > 1) diff += fmt::format(" ({} ranks differ from rank 0)", num_differing);
    throw ConfigError(printable(diff) +
                      "; give every rank the same settings and files (only out, threads, rank_timeout, the " +
                      flag_of("dump_tensors") + " folder and the stop rule's targets may differ)");
}

}  // namespace moebench
