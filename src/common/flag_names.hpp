// SPDX-License-Identifier: Apache-2.0
// Errors below the CLI name fields; the user typed flags. Which flag spells which field is the CLI's to say: at
// start-up it registers the run field table's flags and its own options' (cli/flag_names.cpp), and a message below
// the CLI spells a flag only through flag_of(key), never as a literal.
#pragma once
#include <map>
#include <string>

namespace moebench {

/// `flag` ("--batch", "-o") spells field `key` ("batch") on the command line. The CLI calls it at start-up.
void register_flag(const std::string& key, const std::string& flag);
/// The flag that spells `key`; `key` itself where none is registered (the library used without the CLI).
std::string flag_of(const std::string& key);
/// Every registered (key, flag).
std::map<std::string, std::string> registered_flags();

}  // namespace moebench
