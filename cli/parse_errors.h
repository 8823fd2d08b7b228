// The one line for a command line CLI11 refused, in the project's error form (`FLAG: what; valid:
// ... (hint: ...)`, docs/cli.md): CLI11's own messages rewritten per kind of refusal.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace shardsim::cli {

// `app` is the whole command line's (its subcommands name the valid words); argv as main got it.
std::string ParseErrorLine(CLI::App& app, const CLI::ParseError& e, int argc, char** argv);

}  // namespace shardsim::cli
