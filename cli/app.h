// The command-line boundary: parses flags (CLI11), dispatches to a subcommand, and turns every
// InputError into one line on stderr with exit status 2 (1 for an internal failure).
#pragma once

namespace shardsim::cli {

// Runs the shardsim command line; returns the process exit status.
int Run(int argc, char** argv);

}  // namespace shardsim::cli
