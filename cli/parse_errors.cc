#include "cli/parse_errors.h"

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <vector>

#include "core/error.h"
#include "core/suggest.h"

namespace shardsim::cli {
namespace {

// What a value of CLI11's type name `type` ("INT:INT in [1 - 1073741824]", "TEXT") may be.
std::string ValueKind(const std::string& type) {
  std::smatch m;
  if (std::regex_match(type, m, std::regex(R"((\w+)(?::\w+)? in \[(.+) - (.+)\])"))) {
    return std::string(m[1] == "INT" || m[1] == "UINT" ? "a whole number" : "a number") + " from " + m[2].str() + " to " + m[3].str();
  }
  const std::string base = type.substr(0, type.find(':'));
  if (base == "INT" || base == "UINT") return "a whole number";
  if (base == "FLOAT" || base == "NUMBER") return "a number";
  return "a value";
}

bool IsNumber(const std::string& text) {
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

bool IsWholeNumber(const std::string& text) {
  const size_t digits = text.rfind('-', 0) == 0 ? 1 : 0;
  return text.size() > digits && text.find_first_not_of("0123456789", digits) == std::string::npos;
}

// "'V' is out of range" for a number of the right kind, else what it is not.
std::string RangeProblem(const std::string& value, const std::string& low, const std::string& high) {
  const bool whole = IsWholeNumber(low) && IsWholeNumber(high);
  if (whole ? IsWholeNumber(value) : IsNumber(value)) return "'" + value + "' is out of range";
  return "'" + value + "' is not " + (whole ? "a whole number" : "a number");
}

// What option `name` of `command` takes, from its type (ValueKind) or, for text, its help line.
std::string ValueOf(const CLI::App* command, const std::string& name, const std::string& type) {
  const std::string kind = ValueKind(type);
  if (kind != "a value" || command == nullptr) return kind;
  const CLI::Option* opt = command->get_option_no_throw(name);
  return opt != nullptr && !opt->get_description().empty() ? opt->get_description() : kind;
}

// The options of `sub` ("--model", ...), as a user types them.
std::vector<std::string> OptionNames(const CLI::App& sub) {
  std::vector<std::string> known;
  for (const CLI::Option* opt : sub.get_options()) {
    for (const std::string& name : opt->get_lnames()) known.push_back("--" + name);
  }
  return known;
}

}  // namespace

std::string ParseErrorLine(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  std::string message = e.what();
  std::replace(message.begin(), message.end(), '\n', ' ');
  const std::string sub = argc > 1 && argv[1][0] != '-' ? argv[1] : "";
  const std::string help = "run '" + (sub.empty() ? std::string("shardsim --help") : "shardsim " + sub + " --help") + "'";
  const CLI::App* command = sub.empty() ? nullptr : app.get_subcommand(sub);
  const std::vector<std::string> known = command ? OptionNames(*command) : std::vector<std::string>{};
  std::smatch m;
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr || message == "A subcommand is required") {
    // Options the command line's own level has, where no subcommand came first.
    const std::vector<std::string> options = command ? known : OptionNames(app);
    for (std::string arg : app.remaining(true)) {
      if (arg.size() > 1 && arg[0] == '-' && !IsNumber(arg)) {  // an option; "-1" is a value
        arg = arg.substr(0, arg.find('='));
        if (std::find(options.begin(), options.end(), arg) != options.end()) continue;
        const std::string suggestion = DidYouMean(arg, options);
        return InputError(sub, "unknown option '" + arg + "'" + (suggestion.empty() ? "" : "; " + suggestion),
                          command ? JoinNames(options) : "a subcommand first, then its options", help).what();
      }
      if (message == "A subcommand is required") break;
      return InputError(sub.empty() ? "shardsim" : sub, "unexpected argument '" + arg + "'", known.empty() ? "a subcommand" : "the options " + JoinNames(known),
                        "a value goes right after its option (--model llama3-8b); " + help)
          .what();
    }
  }
  if (message == "A subcommand is required") {
    std::vector<std::string> names;
    for (const CLI::App* s : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(s->get_name());
    return InputError("", "no subcommand given", JoinNames(names), help).what();
  }
  if (std::regex_match(message, m, std::regex(R"((\S+): At Most (\d+) required but received (\d+))"))) {
    return InputError(m[1], "given " + m[3].str() + " times", m[2] == "1" ? "once" : "at most " + m[2].str() + " times", "keep the one you mean").what();
  }
  if (std::regex_match(message, m, std::regex(R"((\S+): \d+ required (.+) missing)"))) {
    return InputError(m[1], "needs a value", ValueOf(command, m[1], m[2]), "put the value right after it (" + m[1].str() + " VALUE)").what();
  }
  if (std::regex_match(message, m, std::regex(R"((\S+): Value (.*) not in range (.+) to (.+))"))) {
    return InputError(m[1], RangeProblem(m[2], m[3], m[4]), m[3].str() + " to " + m[4].str(), help).what();
  }
  // A value CLI11 could not read as the option's type ("--steps abc").
  if (std::regex_match(message, m, std::regex(R"(Could not convert: (\S+) = (.*))"))) {
    const CLI::Option* opt = command ? command->get_option_no_throw(m[1]) : nullptr;
    if (opt != nullptr && opt->get_expected_max() == 0) return InputError(m[1], "is a switch and takes no value", m[1].str() + " alone", "leave the value out").what();
    const std::string kind = opt ? ValueKind(opt->get_type_name()) : "a value of its kind";
    return InputError(m[1], "'" + m[2].str() + "' is not " + kind, kind, help).what();
  }
  if (std::regex_match(message, m, std::regex(R"((\S+): Should be true/false or a number)"))) {
    return InputError(m[1], "is a switch and takes no value", m[1].str() + " alone", "leave the value out").what();
  }
  if (std::regex_match(message, m, std::regex(R"((\S+): (.*) not in \{(.*)\})"))) {
    std::vector<std::string> values;
    std::string list = m[3];
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      values.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
    const std::string suggestion = DidYouMean(m[2].str(), values);
    return InputError(m[1], "'" + m[2].str() + "' is not one of them" + (suggestion.empty() ? "" : "; " + suggestion), JoinNames(values), help).what();
  }
  if (std::regex_match(message, m, std::regex(R"((\S+) requires (\S+))"))) {
    return InputError(m[1], "needs " + m[2].str(), m[1].str() + " with " + m[2].str(), "add " + m[2].str() + ", or leave " + m[1].str() + " out").what();
  }
  if (std::regex_match(message, m, std::regex(R"((\S+) excludes (\S+))"))) {
    return InputError(m[1], "not with " + m[2].str(), "one of " + m[1].str() + " and " + m[2].str(), "leave one of them out").what();
  }
  // One of our own checks (a CLI11 validator from a parser of ours) already says what is valid.
  if (message.find("; valid: ") != std::string::npos) return message.find("(hint: ") != std::string::npos ? message : message + " (hint: " + help + ")";
  return InputError("", message, known.empty() ? "what the help lists" : "the options " + JoinNames(known), help).what();
}

}  // namespace shardsim::cli
