// SPDX-License-Identifier: Apache-2.0
#include "config/hardware_fields.hpp"

#include "common/did_you_mean.hpp"
#include "common/error.hpp"
#include "common/names.hpp"
#include "common/overloaded.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace moebench {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;  // GB/s fields are decimal gigabytes per second (not gigabits)
constexpr double kTera = 1e12;

using K = HardwareFieldKind;
using N = HardwareFieldNeed;
using P = HardwareProfile;

// Rows by kind. Numbers: the plausible range in the field's unit, the SI scale to the member.
HardwareField figure(std::string key, std::string unit, N need, double si_scale, double lo, double hi,
                     double P::*member, std::string meaning) {
    HardwareField f;
    f.key = std::move(key);
    f.unit = std::move(unit);
    f.kind = K::number;
    f.need = need;
    f.si_scale = si_scale;
    f.lo = lo;
    f.hi = hi;
    f.meaning = std::move(meaning);
    f.member = member;
    return f;
}
// A figure every profile gives: positive and within its range.
HardwareField required_figure(std::string key, std::string unit, double si_scale, double lo, double hi,
                              double P::*member, std::string meaning) {
    return figure(std::move(key), std::move(unit), N::required, si_scale, lo, hi, member, std::move(meaning));
}
// A figure a profile may leave out: absent or 0 = not supported (or unknown); otherwise within its range.
HardwareField optional_figure(std::string key, std::string unit, double si_scale, double lo, double hi,
                              double P::*member, std::string meaning) {
    return figure(std::move(key), std::move(unit), N::optional, si_scale, lo, hi, member, std::move(meaning));
}
// One of the ways to give the same member, exactly one of which a profile gives; `recorded`: the one the report's
// hardware block writes.
HardwareField one_of_figure(std::string key, std::string unit, double si_scale, double lo, double hi, double P::*member,
                            bool recorded, std::string meaning) {
    HardwareField f = figure(std::move(key), std::move(unit), N::one_of, si_scale, lo, hi, member, std::move(meaning));
    f.recorded = recorded;
    return f;
}
// A whole number; `fix` is what an out-of-range value's error advises.
HardwareField count(std::string key, double lo, double hi, int64_t default_count, int64_t P::*member,
                    std::string meaning, std::string fix) {
    HardwareField f;
    f.key = std::move(key);
    f.unit = "count";
    f.kind = K::count;
    f.lo = lo;
    f.hi = hi;
    f.default_count = default_count;
    f.meaning = std::move(meaning);
    f.fix = std::move(fix);
    f.member = member;
    return f;
}
HardwareField text(std::string key, HardwareTextDefault dflt, std::string P::*member, std::string meaning) {
    HardwareField f;
    f.key = std::move(key);
    f.kind = K::text;
    f.text_default = dflt;
    f.meaning = std::move(meaning);
    f.member = member;
    return f;
}
// Text that the report's hardware block leaves out (a profile's provenance, not a figure a time depends on).
HardwareField unrecorded_text(std::string key, std::string P::*member, std::string meaning) {
    HardwareField f = text(std::move(key), HardwareTextDefault::empty, member, std::move(meaning));
    f.recorded = false;
    return f;
}
HardwareField other(std::string key, std::string unit, K kind, bool recorded, HardwareMember member,
                    std::string meaning) {
    HardwareField f;
    f.key = std::move(key);
    f.unit = std::move(unit);
    f.kind = kind;
    f.recorded = recorded;
    f.meaning = std::move(meaning);
    f.member = member;
    return f;
}

constexpr auto kEmpty = HardwareTextDefault::empty;

// The plausible ranges lie far beyond any accelerator announced as of 2025 (H200: 4.8 TB/s, B200: 2.25 PFLOP/s dense
// bf16, GB300: 15 PFLOP/s dense fp4 and 1.4 kW, NVLink 5: 900 GB/s per direction), yet bounded, so that a typo such
// as 1e300 is refused by name instead of turning every modeled time into 0 or inf.
const std::vector<HardwareField> kHardwareFields = {
    other("schema", "", K::schema, true, {}, "\"moebench.hardware/1\""),
    text("name", HardwareTextDefault::file_stem, &P::name, "short name"),
    text("display_name", HardwareTextDefault::name, &P::display_name, "vendor's product name"),
    text("comment", kEmpty, &P::comment, "conventions used for the figures (dense vs sparse, what \"memory\" means)"),
    other("sources", "list of strings", K::text_list, false, &P::comment,
          "the datasheets the figures come from (appended to the comment on load)"),
    one_of_figure("memory_gib", "2^30 B", kGiB, 0.001, 65536, &P::memory_bytes, false, "device memory capacity"),
    one_of_figure("memory_gb", "10^9 B", kGB, 0.001, 70000, &P::memory_bytes, false, "device memory capacity"),
    one_of_figure("memory_bytes", "B", 1, 1e6, 7e13, &P::memory_bytes, true,
                  "device memory capacity (the report's hardware block records it so)"),
    required_figure("memory_bw_gbps", "GB/s (10^9 bytes/s, not gigabits)", kGB, 0.1, 100000, &P::memory_bw_bytes_per_s,
                    "HBM bandwidth"),
    required_figure("bf16_tflops", "10^12 FLOP/s", kTera, 0.001, 100000, &P::bf16_flops,
                    "dense BF16 tensor/matrix peak (no 2:4 sparsity)"),
    optional_figure("fp8_tflops", "10^12 FLOP/s", kTera, 0.001, 200000, &P::fp8_flops,
                    "dense FP8 peak; 0 = no FP8 units"),
    optional_figure("fp4_tflops", "10^12 FLOP/s", kTera, 0.001, 400000, &P::fp4_flops,
                    "dense FP4 tensor peak (NVFP4 / MXFP4 block-scaled formats, no 2:4 sparsity); 0 = no FP4 units"),
    optional_figure("fp32_tflops", "10^12 FLOP/s", kTera, 0.001, 100000, &P::fp32_flops,
                    "FP32 (non-tensor / vector) peak"),
    optional_figure(
        "int4_tops", "10^12 op/s", kTera, 0.001, 400000, &P::int4_flops,
        "dense INT4 tensor peak; 0 = not supported (FP4 is not INT4; int4 weights are weight-only and compute at the "
        "bf16 peak)"),
    text("scaleup_name", kEmpty, &P::scaleup_name, "\"NVLink4\", \"Infinity Fabric\", ..."),
    optional_figure("scaleup_bw_gbps", "GB/s", kGB, 0.01, 100000, &P::scaleup_bw_bytes_per_s,
                    "scale-up bandwidth per GPU, per direction (NVLink total / 2)"),
    count("scaleup_links", 0, 1024, 0, &P::scaleup_links, "scale-up links per GPU",
          "use the number of scale-up links per GPU"),
    optional_figure("pcie_bw_gbps", "GB/s", kGB, 0.01, 10000, &P::pcie_bw_bytes_per_s, "host link per direction"),
    optional_figure("network_bw_gbps", "GB/s", kGB, 0.001, 10000, &P::network_bw_bytes_per_s,
                    "scale-out NIC bandwidth per GPU per direction (400 Gb/s = 50 GB/s)"),
    count("gpus_per_node", 1, 4096, 8, &P::gpus_per_node, "GPUs in one scale-up domain / node",
          "use the GPUs that share one scale-up domain (e.g. 8, or 72)"),
    optional_figure("tdp_w", "W", 1, 1, 20000, &P::tdp_w,
                    "board power: the most the GPU module draws (TDP / TGP / TBP); 0 = not given"),
    optional_figure("price_per_gpu_hour", "USD per GPU-hour", 1, 0.001, 10000, &P::price_per_gpu_hour,
                    "a default rental price, stated with its source and date in price_source; 0 = none public"),
    text("price_source", kEmpty, &P::price_source, "where price_per_gpu_hour comes from, what kind of price, its date"),
    unrecorded_text(
        "machine", &P::machine,
        "the machine a measured profile was measured on (the CPU profile `moebench devices` measures records its "
        "host, CPU model and CPU count); `moebench calibrate` refuses reports of another machine"),
    other("sim", "object", K::object, false, {},
          "the sim backend's efficiency settings (compute and memory efficiency, overheads): docs/sim-backend.md"),
};

constexpr const char* kSchema = "moebench.hardware/1";

std::string known_keys_list() {
    std::string s;
    for (const HardwareField& f : kHardwareFields) s += (s.empty() ? "" : ", ") + f.key;
    return s;
}

std::vector<std::string> hardware_field_keys() {
    std::vector<std::string> keys;
    for (const HardwareField& f : kHardwareFields) keys.push_back(f.key);
    return keys;
}

// The fields that fill the same member as `f` (the one-of group of memory).
std::vector<const HardwareField*> same_member(const HardwareField& f) {
    std::vector<const HardwareField*> out;
    for (const HardwareField& g : kHardwareFields)
        if (g.need == N::one_of && g.member == f.member) out.push_back(&g);
    return out;
}

[[noreturn]] void out_of_range(const JsonReader& r, const HardwareField& f, const std::string& what) {
    config_error(r.field(f.key), fmt::format("{} (plausible: {:g} to {:g})", what, f.lo, f.hi),
                 json_brief(r.raw().at(f.key)), "use the datasheet value in the unit the field's name gives");
}

// A figure in its field's unit: required or one-of, a finite positive number in range; optional, 0 (or absent)
// means "not supported" (or unknown), otherwise within the range.
double read_number(const JsonReader& r, const HardwareField& f) {
    if (f.need == N::optional) {
        const double v = r.opt_double(f.key, 0.0);
        if (!std::isfinite(v) || v < 0)
            config_error(r.field(f.key), "must not be negative", json_brief(r.raw().at(f.key)),
                         "use the datasheet value, or 0 when the GPU does not support it");
        if (v != 0 && (v < f.lo || v > f.hi)) out_of_range(r, f, "is outside the physically plausible range (or 0)");
        return v;
    }
    const double v = r.req_double(f.key);
    if (!std::isfinite(v) || v <= 0) out_of_range(r, f, "must be a positive number");
    if (v < f.lo || v > f.hi) out_of_range(r, f, "is outside the physically plausible range");
    return v;
}

int64_t read_count(const JsonReader& r, const HardwareField& f) {
    int64_t v = f.default_count;
    if (f.need == N::required || r.has(f.key)) v = f.lo >= 1 ? r.req_positive(f.key) : r.opt_nonneg(f.key, v);
    if (static_cast<double>(v) < f.lo || static_cast<double>(v) > f.hi)
        config_error(r.field(f.key),
                     fmt::format("is outside the physically plausible range ({:g} to {:g})", f.lo, f.hi),
                     std::to_string(v), f.fix);
    return v;
}

// Exactly one field of a one-of group; checked at the group's first row, so that errors come in table order.
void check_one_of(const JsonReader& r, const HardwareField& f) {
    const std::vector<const HardwareField*> group = same_member(f);
    if (group.front() != &f) return;
    int given = 0;
    std::string names;
    for (size_t i = 0; i < group.size(); ++i) {
        given += r.has(group[i]->key) ? 1 : 0;
        names += (i == 0 ? "" : i + 1 == group.size() ? " or " : ", ") + group[i]->key + " (" + group[i]->unit + ")";
    }
    if (given == 0) config_error(r.field(f.key), "required field is missing", "", "give exactly one of " + names);
    if (given > 1) config_error(r.field(f.key), f.meaning + " given twice", "", "give exactly one of " + names);
}

void read_field(const JsonReader& r, const HardwareField& f, HardwareProfile& h, const std::string& path) {
    switch (f.kind) {
        case K::schema:
            if (r.has(f.key) && r.req_string(f.key) != kSchema)
                config_error(r.field(f.key), "unsupported schema", r.req_string(f.key),
                             fmt::format("use \"{}\"", kSchema));
            return;
        case K::text: {
            std::string dflt;
            if (f.text_default == HardwareTextDefault::file_stem) {
                dflt = std::filesystem::path(path).stem().string();
                if (dflt.empty()) dflt = "custom";
            } else if (f.text_default == HardwareTextDefault::name) {
                dflt = h.name;
            }
            std::string& to = h.*std::get<std::string P::*>(f.member);
            to = r.opt_string(f.key, dflt);
            // Names reach every plan, report and label (a file's stem too: a file name may hold a newline); a comment
            // is free text.
            if (f.key != std::string("comment")) require_printable_name(r.has(f.key) ? r.field(f.key) : path, to);
            return;
        }
        case K::text_list: {
            if (!r.has(f.key)) return;
            const json& s = r.raw().at(f.key);
            if (!s.is_array()) config_error(r.field(f.key), "must be a list of strings", json_brief(s), "");
            std::string& to = h.*std::get<std::string P::*>(f.member);
            for (const auto& e : s) {
                if (!e.is_string()) config_error(r.field(f.key), "must be a list of strings", json_brief(e), "");
                to += (to.empty() ? "" : " Sources: ") + e.get<std::string>();
            }
            return;
        }
        case K::number:
            if (f.need == N::one_of) {
                check_one_of(r, f);
                if (!r.has(f.key)) return;
            }
            h.*std::get<double P::*>(f.member) = read_number(r, f) * f.si_scale;
            return;
        case K::count: h.*std::get<int64_t P::*>(f.member) = read_count(r, f); return;
        case K::object: return;
    }
}

std::string need_text(const HardwareField& f) {
    if (f.need == N::required) return "yes";
    if (f.need == N::one_of) {
        std::string names;
        for (const HardwareField* g : same_member(f)) names += (names.empty() ? "" : ", ") + g->key;
        return "exactly one of " + names;
    }
    switch (f.kind) {
        case K::number: return "no (0)";
        case K::count: return fmt::format("no ({})", f.default_count);
        case K::text:
            return f.text_default == HardwareTextDefault::file_stem ? "no (file stem)"
                   : f.text_default == HardwareTextDefault::name    ? "no (name)"
                                                                    : "no";
        default: return "no";
    }
}

std::string range_text(const HardwareField& f) {
    if (f.kind != K::number && f.kind != K::count) return "";
    std::string s = fmt::format("{:g} to {:g}", f.lo, f.hi);
    if (f.kind == K::number && f.need == N::optional) s += ", or 0";
    return s;
}

}  // namespace

const std::vector<HardwareField>& hardware_fields() { return kHardwareFields; }

const HardwareField* find_hardware_field(const std::string& key) {
    for (const HardwareField& f : kHardwareFields)
        if (f.key == key) return &f;
    return nullptr;
}

HardwareProfile hardware_from_fields(const json& j, const std::string& path) {
    JsonReader r(j, path);
    // Unknown keys are almost always typos of a unit suffix ("memory_bw_gbs"): refuse them rather than ignore.
    for (const auto& [key, value] : j.items())
        if (!find_hardware_field(key))
            config_error(r.field(key), "unknown hardware field", key,
                         did_you_mean(key, hardware_field_keys(), "use one of: " + known_keys_list()));
    HardwareProfile h;
    h.source = path;
    for (const HardwareField& f : kHardwareFields) read_field(r, f, h, path);
    // A price means little without where and when it was quoted.
    if (h.price_per_gpu_hour > 0 && h.price_source.empty())
        config_error(
            r.field("price_source"), "is required with price_per_gpu_hour", "",
            "say where the price comes from, what kind of price it is (on-demand, reserved, TCO) and its date");
    return h;
}

json hardware_fields_to_json(const HardwareProfile& h) {
    json j = json::object();
    for (const HardwareField& f : kHardwareFields) {
        if (!f.recorded) continue;
        if (f.kind == K::schema) {
            j[f.key] = kSchema;
            continue;
        }
        std::visit(
            Overloaded{[&](std::monostate) {}, [&](std::string P::*m) { j[f.key] = h.*m; },
                       [&](double P::*m) { j[f.key] = h.*m / f.si_scale; }, [&](int64_t P::*m) { j[f.key] = h.*m; }},
            f.member);
    }
    return j;
}

std::string hardware_fields_table(const std::string& format) {
    const std::vector<std::string> head = {"field", "unit", "required", "plausible range", "meaning"};
    std::vector<std::vector<std::string>> rows;
    for (const HardwareField& f : kHardwareFields)
        rows.push_back({f.key, f.unit, need_text(f), range_text(f), f.meaning});
    if (format == "json") {
        json a = json::array();
        for (const HardwareField& f : kHardwareFields) {
            json o = {{"key", f.key},
                      {"unit", f.unit},
                      {"required", need_text(f)},
                      {"meaning", f.meaning},
                      {"recorded", f.recorded}};
            if (f.kind == K::number || f.kind == K::count) o["range"] = {f.lo, f.hi};
            if (f.kind == K::number) o["si_scale"] = f.si_scale;
            a.push_back(o);
        }
        return a.dump(2) + "\n";
    }
    std::string out;
    if (format == "md") {
        auto line = [&](const std::vector<std::string>& cells, bool code_first) {
            out += "|";
            for (size_t i = 0; i < cells.size(); ++i)
                out += " " + (i == 0 && code_first ? "`" + cells[i] + "`" : cells[i]) + " |";
            out += "\n";
        };
        line(head, false);
        out += "| --- | --- | --- | --- | --- |\n";
        for (const auto& r : rows) line(r, true);
        return out;
    }
    std::vector<size_t> width(head.size());
    for (size_t i = 0; i < head.size(); ++i) {
        width[i] = head[i].size();
        for (const auto& r : rows) width[i] = std::max(width[i], r[i].size());
    }
    auto line = [&](const std::vector<std::string>& cells) {
        std::string l;
        for (size_t i = 0; i < cells.size(); ++i)
            l += i + 1 == cells.size() ? cells[i] : fmt::format("{:<{}}  ", cells[i], width[i]);
        out += l + "\n";
    };
    line(head);
    for (const auto& r : rows) line(r);
    return out;
}

}  // namespace moebench
