// `plan --max-memory`: the memory a plan may use per device, as a fraction of HBM or a size.
#pragma once

#include <string>

namespace shardsim::cli {

// "0.85" (a fraction of HBM in (0, 1]) or a size as core/units' ParseByteSize reads it ("70GiB",
// "75GB"), in bytes; `hbm_bytes` turns a fraction into bytes. Throws InputError naming `where`.
double ParseMemoryLimit(const std::string& text, double hbm_bytes, const std::string& where);

}  // namespace shardsim::cli
