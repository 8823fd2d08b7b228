#include "core/error.h"

namespace shardsim {
namespace {

std::string Compose(const std::string& where, const std::string& what, const std::string& valid,
                    const std::string& hint) {
  std::string line;
  if (!where.empty()) line += where + ": ";
  line += what;
  if (!valid.empty()) line += "; valid: " + valid;
  if (!hint.empty()) line += " (hint: " + hint + ")";
  // One line, always: a message that spans lines breaks scripts that read stderr.
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return line;
}

}  // namespace

InputError::InputError(std::string where, std::string what, std::string valid, std::string hint)
    : std::runtime_error(Compose(where, what, valid, hint)),
      where_(std::move(where)),
      what_(std::move(what)),
      valid_(std::move(valid)),
      hint_(std::move(hint)) {}

InputError InputError::WithPrefix(const std::string& outer) const {
  if (where_.empty()) return InputError(outer, what_, valid_, hint_);
  return InputError(outer + where_, what_, valid_, hint_);
}

namespace internal {
void CheckFailed(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "shardsim: internal error at %s:%d: CHECK(%s) failed: %s\n", file, line,
               condition, message.c_str());
  std::abort();
}
}  // namespace internal

}  // namespace shardsim
