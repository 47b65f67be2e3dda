// SPDX-License-Identifier: Apache-2.0
#include "cli/flag_util.hpp"

#include "common/overloaded.hpp"

namespace moebench::cli {

void RunFieldFlags::add(CLI::App* cmd, const RunField& f) {
    auto b = std::make_unique<Bound>();
    b->field = &f;
    RunConfig probe;
    std::visit(Overloaded{[&](std::string*) { b->opt = cmd->add_option(f.flag, b->value.emplace<std::string>(), f.help); },
                          [&](Mode*) { b->opt = cmd->add_option(f.flag, b->value.emplace<std::string>(), f.help); },
                          [&](int64_t*) { b->opt = cmd->add_option(f.flag, b->value.emplace<int64_t>(), f.help); },
                          [&](uint64_t*) { b->opt = cmd->add_option(f.flag, b->value.emplace<int64_t>(), f.help); },
                          [&](double*) { b->opt = cmd->add_option(f.flag, b->value.emplace<double>(), f.help); },
                          [&](bool*) { b->opt = cmd->add_flag(f.flag, b->value.emplace<bool>(), f.help); }},
               f.ref(probe));
    bound_.push_back(std::move(b));
}

void RunFieldFlags::apply(RunConfig& cfg) const {
    for (const auto& b : bound_) {
        if (b->opt->count() == 0) continue;
        const std::string label = run_field_label("", b->field->key);
        std::visit(Overloaded{[&](Mode* v) { *v = parse_mode(std::get<std::string>(b->value), label); },
                              [&](uint64_t* v) { *v = parse_seed(std::get<int64_t>(b->value), label); },
                              [&](std::string* v) { *v = std::get<std::string>(b->value); },
                              [&](int64_t* v) { *v = std::get<int64_t>(b->value); },
                              [&](double* v) { *v = std::get<double>(b->value); },
                              [&](bool* v) { *v = std::get<bool>(b->value); }},
                   b->field->ref(cfg));
    }
}

CLI::Option* RunFieldFlags::option(const std::string& key) const {
    for (const auto& b : bound_)
        if (b->field->key == key) return b->opt;
    return nullptr;
}

}  // namespace moebench::cli
