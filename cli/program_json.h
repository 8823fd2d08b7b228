// The step program as JSON (`shardsim estimate --dump-program --json`): the layer programs, each
// stage's chunks, task order (every micro-batch) and step-level ops. Deterministic: the same
// program gives byte-identical output (keys sorted, numbers printed exactly). Schema: docs/cli.md.
#pragma once

#include <nlohmann/json.hpp>

#include "strategies/step_program.h"

namespace shardsim::cli {

// One op: name, phase, stream, then compute fields (kind, flops, bytes, m, n, k) or collective
// fields (collective, axes, bytes, overlapped).
nlohmann::json OpJson(const strategies::Op& op);

nlohmann::json ProgramJson(const strategies::StepProgram& program);

}  // namespace shardsim::cli
