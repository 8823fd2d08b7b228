#include "cli/memory_limit.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/units.h"

namespace shardsim::cli {

double ParseMemoryLimit(const std::string& text, double hbm_bytes, const std::string& where) {
  char* end = nullptr;
  const double fraction = std::strtod(text.c_str(), &end);
  if (!text.empty() && end == text.c_str() + text.size()) {
    if (!std::isfinite(fraction) || fraction <= 0 || fraction > 1) {
      throw InputError(where, "'" + text + "' is not a fraction of HBM", "a fraction in (0, 1], e.g. 0.85, or a size such as 70GiB");
    }
    return fraction * hbm_bytes;
  }
  return static_cast<double>(ParseByteSize(text, where));
}

}  // namespace shardsim::cli
