// Errors: one way, used everywhere. Bad user input throws InputError, caught once at the CLI
// boundary (one line on stderr, exit 2). Broken invariants abort loudly through SHARDSIM_CHECK.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace shardsim {

// A problem with what the user gave us. `where` names the input and field
// ("plan.json:/mesh/tensor", "--cluster"), `what` says what is wrong, `valid` what would be
// accepted, and `hint` what to do. All but `what` may be empty.
class InputError : public std::runtime_error {
 public:
  InputError(std::string where, std::string what, std::string valid = "", std::string hint = "");

  const std::string& where() const { return where_; }
  const std::string& problem() const { return what_; }
  const std::string& valid() const { return valid_; }
  const std::string& hint() const { return hint_; }

  // Returns a copy with `outer` prepended to where (for errors raised inside nested readers).
  InputError WithPrefix(const std::string& outer) const;

 private:
  std::string where_, what_, valid_, hint_;
};

// Why a plan cannot run, as a value: the planner keeps it as a miss with its reason; the CLI turns
// it into an InputError. `field` is the plan's JSON path below its root ("mesh/tensor").
struct Infeasibility {
  std::string field, what, valid, hint;
  // The InputError for a plan read from `where` ("plan.json:"): where + "/" + field.
  InputError ToError(const std::string& where) const { return InputError(where + "/" + field, what, valid, hint); }
};

namespace internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition, const std::string& message);
}  // namespace internal

}  // namespace shardsim

// Aborts with file:line when an internal invariant is broken (never for user input).
#define SHARDSIM_CHECK(cond, msg)                                                \
  do {                                                                           \
    if (!(cond)) ::shardsim::internal::CheckFailed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
