// SPDX-License-Identifier: Apache-2.0
#include "config/file_kind.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "config/model_config.hpp"
#include "config/run_fields.hpp"

#include <algorithm>

namespace moebench {

namespace {

std::string schema_of(const json& doc) {
    return doc.contains("schema") && doc["schema"].is_string() ? doc["schema"].get<std::string>() : "";
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// A key a run config may hold besides its fields (annotations, as run_config_from_json skips them).
bool annotation_key(const std::string& k) { return k.empty() || k[0] == '$' || k == "comment" || k == "description"; }

// The document a moebench command writes that is no input of any: its schema's name -> the command.
const char* output_command(const std::string& schema) {
    static const std::pair<const char*, const char*> kOutputs[] = {
        {"moebench.plan/", "moebench plan"},
        {"moebench.devices/", "moebench devices"},
        {"moebench.bench_moe/", "moebench bench moe"},
        {"moebench.bench_a2a/", "moebench bench a2a"},
        {"moebench.trace_info/", "moebench trace info"},
    };
    for (const auto& [prefix, command] : kOutputs)
        if (starts_with(schema, prefix)) return command;
    return nullptr;
}

// What the kind is called, the noun a flag's reader expects, and where a file of the kind goes.
std::string kind_noun(FileKind k) {
    switch (k) {
        case FileKind::model: return "a model config";
        case FileKind::hf_config: return "a Hugging Face config.json (a model)";
        case FileKind::hardware: return "a hardware profile";
        case FileKind::run_config: return "a run config";
        case FileKind::sweep_config: return "a sweep config";
        case FileKind::report: return "a moebench report";
        case FileKind::placement: return "an expert placement";
        case FileKind::output: return "the output of a moebench command";
        case FileKind::unknown: break;
    }
    return "a JSON file";
}

std::string where_it_goes(FileKind k, const json& doc) {
    switch (k) {
        case FileKind::model:
        case FileKind::hf_config: return "pass it to " + flag_of("model");
        case FileKind::hardware: return "pass it to " + flag_of("hardware");
        case FileKind::run_config: return "pass it to " + flag_of("config") + " of moebench run or moebench sweep";
        case FileKind::sweep_config: return "pass it to " + flag_of("config") + " of moebench sweep";
        case FileKind::report:
            return "view it with moebench report, compare it with moebench compare, or re-run it with moebench run " +
                   flag_of("config");
        case FileKind::placement: return "pass it to " + flag_of("placement");
        case FileKind::output: {
            const char* command = output_command(schema_of(doc));
            return std::string("it is what ") + (command ? command : "moebench") + " writes, no input: give " +
                   "the file that command read instead";
        }
        case FileKind::unknown: break;
    }
    return "";
}

}  // namespace

FileKind file_kind(const json& doc) {
    if (!doc.is_object()) return FileKind::unknown;
    const std::string schema = schema_of(doc);
    if (starts_with(schema, "moebench.hardware/")) return FileKind::hardware;
    if (starts_with(schema, "moebench.report/")) return FileKind::report;
    if (starts_with(schema, "moebench.placement/")) return FileKind::placement;
    if (output_command(schema)) return FileKind::output;
    if (!schema.empty()) return FileKind::unknown;  // a schema of no kind we know: its reader says so
    if (doc.contains("moebench") && doc["moebench"].is_string() &&
        starts_with(doc["moebench"].get<std::string>(), "model/"))
        return FileKind::model;
    if (is_hf_config(doc)) return FileKind::hf_config;
    // Without their markers: a model's shape, a profile's two required figures.
    if (doc.contains("hidden_size") && doc.contains("num_layers") && doc.contains("attention")) return FileKind::model;
    if (doc.contains("memory_bw_gbps") && doc.contains("bf16_tflops")) return FileKind::hardware;
    size_t num_fields = 0;
    for (const auto& [k, v] : doc.items()) {
        if (annotation_key(k)) continue;
        if (k == "axes" || k == "sweep") continue;
        if (!find_run_field(k)) return FileKind::unknown;  // a typo: the run config reader names it
        ++num_fields;
    }
    if (doc.contains("axes") || doc.contains("sweep")) return FileKind::sweep_config;
    return num_fields > 0 ? FileKind::run_config : FileKind::unknown;
}

std::string file_kind_name(const json& doc) {
    const FileKind k = file_kind(doc);
    const std::string schema = schema_of(doc);
    return kind_noun(k) + (k != FileKind::unknown && !schema.empty() ? " (" + schema + ")" : "");
}

void refuse_other_file_kind(const json& doc, const std::string& label, std::initializer_list<FileKind> accepted) {
    const FileKind k = file_kind(doc);
    if (k == FileKind::unknown || std::find(accepted.begin(), accepted.end(), k) != accepted.end()) return;
    const std::string wanted = accepted.size() > 0 ? kind_noun(*accepted.begin()) : "this input";
    config_error(label, "is " + file_kind_name(doc) + ", not " + wanted, "", where_it_goes(k, doc));
}

}  // namespace moebench
