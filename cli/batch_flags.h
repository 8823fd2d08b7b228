// --global-batch-tokens and --seq-len for the subcommands that read a plan (estimate, simulate,
// run, validate): one rule for all of them, applied as the plan fields they fix.
#pragma once

#include <cstdint>
#include <string>

#include "cli/commands.h"

namespace shardsim::cli {

struct BatchFlags {
  std::string global_batch_tokens;  // "4M" (x1024^2), "4MB" (x1000^2), "4194304": as plan's; empty: not given
  int64_t seq_len = 0;              // 0: not given
};

// Fixes the plan's seq_len (--seq-len S) and global_batch_size (--global-batch-tokens T: T / S
// sequences, S from --seq-len, else from the plan) by appending them to `inputs.overrides` as
// `seq_len=S` and `global_batch_size=T/S`, after the user's own: the flags win over the plan
// file, and shardsim-runtime receives them as it receives --set.
// Throws InputError naming the flag when T is not a whole number of S-token sequences, when no
// sequence length is known for T, or when an explicit --set of the same field gives another value.
void ApplyBatchFlags(const BatchFlags& flags, Inputs& inputs);

}  // namespace shardsim::cli
