// SPDX-License-Identifier: Apache-2.0
#include "cli/flag_util.hpp"

#include "cli/set_flags.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/overloaded.hpp"
#include "common/read_file.hpp"
#include "common/tensor_file.hpp"
#include "sweep/axes.hpp"
#include "workload/trace_import.hpp"

#include <fmt/format.h>
#include <algorithm>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>

namespace moebench::cli {

namespace {

// The run fields' one-letter names: one dialect, -o is --out on every command that writes a file.
std::string option_names(const RunField& f) { return f.key == "out" ? "-o," + f.flag : f.flag; }

// "--batch" of "-o,--out" style names: the long one, as messages name an option.
std::string long_name(const std::string& names) { return names.substr(names.rfind(',') + 1); }

// Text that is a sweep's list or range rather than one value: 1,2,4  1..64  1-64.
bool list_or_range(const std::string& text) {
    return text.find(',') != std::string::npos || text.find("..") != std::string::npos || !range_meant(text).empty();
}

// The fix for one value that is not a number: a list or range named as a sweep's (`sweep_example`: how a sweep takes
// it, the value appended: "moebench sweep --batch "), else `fix`.
std::string number_fix(const std::string& text, const std::string& sweep_example, const std::string& fix) {
    if (sweep_example.empty() || !list_or_range(text)) return fix;
    const std::string meant = range_meant(text);
    return "a run takes one value; a list (1,2,4) or a range (1..64) is a sweep's axis: " + sweep_example +
           (meant.empty() ? text : meant);
}

}  // namespace

int64_t parse_whole_number(const std::string& text, const std::string& label, const std::string& sweep_example) {
    int64_t v = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec == std::errc::result_out_of_range)
        config_error(label, "is out of range (whole numbers up to 9223372036854775807)", text, "use a smaller value");
    if (ec != std::errc() || ptr != end || text.empty())
        config_error(label, "must be a whole number", text,
                     number_fix(text, sweep_example, "write digits only, e.g. 8"));
    return v;
}

std::vector<int64_t> parse_whole_list(const std::string& text, const std::string& label, int64_t min) {
    std::vector<int64_t> out;
    for (const json& v : parse_axis_values(text, label)) {
        if (v.is_string()) {
            const std::string item = v.get<std::string>(), meant = range_meant(item);
            config_error(label, "takes whole numbers and " + item + " is not one: " + kAxisSyntax, text,
                         meant.empty() ? "write whole numbers, e.g. 8, 1,2,4 or 1..64"
                                       : "write " + meant + " (powers of two) or " + meant + ":+1 (every value)");
        }
        if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())
            config_error(label, "is out of range", v.dump(), "use a smaller value");
        if (!v.is_number_integer())
            config_error(label, "takes whole numbers and " + v.dump() + " is not one: " + kAxisSyntax, text,
                         "write whole numbers, e.g. 8, 1,2,4 or 1..64");
        const int64_t n = v.get<int64_t>();
        if (n < min)
            config_error(label, "must be at least " + std::to_string(min), std::to_string(n),
                         "e.g. " + label + " " + std::to_string(std::max<int64_t>(min, 8)));
        out.push_back(n);
    }
    return out;
}

double parse_decimal(const std::string& text, const std::string& label, const std::string& sweep_example) {
    const char* begin = text.c_str();
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (text.empty() || end != begin + text.size() || text.find_first_of("xXpP") != std::string::npos)
        config_error(label, "must be a number", text, number_fix(text, sweep_example, "write a decimal, e.g. 1.25"));
    if (!std::isfinite(v)) config_error(label, "must be a finite number", text, "write a decimal, e.g. 1.25");
    return v;
}

std::string sweep_example_of(const RunField& f) {
    return f.sweep_flag ? "moebench sweep " + f.flag + " " : "moebench sweep --set " + f.key + "=";
}

json run_field_value(const RunField& f, const std::string& text, const std::string& label) {
    switch (run_field_type(f)) {
        case RunFieldType::whole: return parse_whole_number(text, label, sweep_example_of(f));
        case RunFieldType::decimal: return parse_decimal(text, label, sweep_example_of(f));
        case RunFieldType::flag:
        case RunFieldType::text: break;
    }
    return set_value(text);
}

CLI::Option* add_decimal_option(CLI::App* cmd, const std::string& names, double& target, const std::string& help) {
    const std::string label = long_name(names);
    return cmd
        ->add_option_function<std::string>(
            names, [&target, label](const std::string& text) { target = parse_decimal(text, label); }, help)
        ->type_name("FLOAT");
}

CLI::Option* add_whole_list_option(CLI::App* cmd, const std::string& names, std::vector<int64_t>& target,
                                   const std::string& help, int64_t min) {
    const std::string label = long_name(names);
    return cmd
        ->add_option_function<std::string>(
            names, [&target, label, min](const std::string& text) { target = parse_whole_list(text, label, min); },
            help)
        ->type_name("LIST");
}

void RunFieldFlags::add(CLI::App* cmd, const RunField& f) {
    auto b = std::make_unique<Bound>();
    b->field = &f;
    // Numbers are read as text and parsed by parse_whole_number / parse_decimal (no saturation, one message on every
    // command); --help names their type as CLI11 names its own.
    switch (run_field_type(f)) {
        case RunFieldType::flag: b->opt = cmd->add_flag(option_names(f), b->value.emplace<bool>(), f.help); break;
        case RunFieldType::whole:
            b->opt = cmd->add_option(option_names(f), b->value.emplace<std::string>(), f.help)->type_name("INT");
            break;
        case RunFieldType::decimal:
            b->opt = cmd->add_option(option_names(f), b->value.emplace<std::string>(), f.help)->type_name("FLOAT");
            break;
        case RunFieldType::text:
            b->opt = cmd->add_option(option_names(f), b->value.emplace<std::string>(), f.help)
                         ->type_name(f.key == "out" ? "FILE" : "TEXT");
            break;
    }
    bound_.push_back(std::move(b));
}

void RunFieldFlags::apply(RunConfig& cfg) const {
    for (const auto& b : bound_) {
        if (b->opt->count() == 0) continue;
        const RunField& f = *b->field;
        const std::string label = run_field_label("", f.key);
        // Where a list or range was given for one value: how a sweep takes it.
        const std::string sweep_example = sweep_example_of(f);
        const auto text = [&] { return std::get<std::string>(b->value); };
        std::visit(
            Overloaded{[&](Mode* v) { *v = parse_mode(text(), label); },
                       [&](uint64_t* v) { *v = parse_seed(parse_whole_number(text(), label, sweep_example), label); },
                       [&](std::string* v) { *v = text(); },
                       [&](int64_t* v) { *v = parse_whole_number(text(), label, sweep_example); },
                       [&](double* v) { *v = parse_decimal(text(), label, sweep_example); },
                       [&](bool* v) { *v = std::get<bool>(b->value); }},
            f.ref(cfg));
    }
}

std::vector<std::pair<std::string, std::string>> RunFieldFlags::given_as_written() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& b : bound_) {
        if (b->opt->count() == 0) continue;
        std::string text = b->field->flag;
        if (!std::holds_alternative<bool>(b->value))
            for (const std::string& r : b->opt->results()) text += " " + r;
        out.emplace_back(b->field->key, text);
    }
    return out;
}

CLI::Option* RunFieldFlags::option(const std::string& key) const {
    for (const auto& b : bound_)
        if (b->field->key == key) return b->opt;
    return nullptr;
}

RoutingTrace load_any_trace(const std::string& path, int64_t num_experts, const std::string& flag) {
    require_readable_file(path, flag);  // a folder, FIFO or device is refused by name, before any read
    const std::string head = peek_file_bytes(path, 64);
    const int64_t bytes = file_size_bytes(path);
    if (head.size() >= 9 && looks_like_safetensors(head, bytes)) return read_trace(path);
    ImportSummary summary;
    return import_trace(path, num_experts, &summary);
}

void emit_view(const std::string& view, const std::string& out) {
    if (out.empty() || out == "-") {
        std::cout << view;
        std::cout.flush();
    } else {
        write_file_atomic(out, view);
        std::cerr << "moebench: wrote " << out << "\n";
    }
}

}  // namespace moebench::cli
