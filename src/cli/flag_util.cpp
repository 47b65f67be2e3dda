// SPDX-License-Identifier: Apache-2.0
#include "cli/flag_util.hpp"

#include "common/error.hpp"
#include "common/overloaded.hpp"

#include <charconv>

namespace moebench::cli {

namespace {

// A whole-number flag, read by us rather than by CLI11 (which saturates 99999999999999999999 to 2^63 - 1 and goes on
// with a value the user never typed).
int64_t parse_whole_number(const std::string& text, const std::string& label) {
    int64_t v = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec == std::errc::result_out_of_range)
        config_error(label, "is out of range (whole numbers up to 9223372036854775807)", text, "use a smaller value");
    if (ec != std::errc() || ptr != end || text.empty())
        config_error(label, "must be a whole number", text, "write digits only, e.g. 8");
    return v;
}

// The run fields' one-letter names: one dialect, -o is --out on every command that writes a file.
std::string option_names(const RunField& f) { return f.key == "out" ? "-o," + f.flag : f.flag; }

}  // namespace

void RunFieldFlags::add(CLI::App* cmd, const RunField& f) {
    auto b = std::make_unique<Bound>();
    b->field = &f;
    RunConfig probe;
    std::visit(Overloaded{[&](std::string*) {
                              b->opt = cmd->add_option(option_names(f), b->value.emplace<std::string>(), f.help)
                                           ->type_name(f.key == "out" ? "FILE" : "TEXT");
                          },
                          [&](Mode*) { b->opt = cmd->add_option(option_names(f), b->value.emplace<std::string>(), f.help); },
                          [&](int64_t*) { b->opt = cmd->add_option(option_names(f), b->value.emplace<std::string>(), f.help); },
                          [&](uint64_t*) { b->opt = cmd->add_option(option_names(f), b->value.emplace<std::string>(), f.help); },
                          [&](double*) { b->opt = cmd->add_option(option_names(f), b->value.emplace<double>(), f.help); },
                          [&](bool*) { b->opt = cmd->add_flag(option_names(f), b->value.emplace<bool>(), f.help); }},
               f.ref(probe));
    bound_.push_back(std::move(b));
}

void RunFieldFlags::apply(RunConfig& cfg) const {
    for (const auto& b : bound_) {
        if (b->opt->count() == 0) continue;
        const std::string label = run_field_label("", b->field->key);
        std::visit(Overloaded{[&](Mode* v) { *v = parse_mode(std::get<std::string>(b->value), label); },
                              [&](uint64_t* v) {
                                  *v = parse_seed(parse_whole_number(std::get<std::string>(b->value), label), label);
                              },
                              [&](std::string* v) { *v = std::get<std::string>(b->value); },
                              [&](int64_t* v) { *v = parse_whole_number(std::get<std::string>(b->value), label); },
                              [&](double* v) { *v = std::get<double>(b->value); },
                              [&](bool* v) { *v = std::get<bool>(b->value); }},
                   b->field->ref(cfg));
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

}  // namespace moebench::cli
