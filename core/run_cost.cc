#include "core/run_cost.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/units.h"

namespace shardsim {

void CheckTrainTokens(double train_tokens, double tokens_per_step) {
  if (train_tokens > 0 && train_tokens < tokens_per_step) {
    // Exact counts: the two flags' suffixes differ (a budget's M is 10^6, a step's 2^20).
    char what[160];
    std::snprintf(what, sizeof what, "%.15g tokens is less than one step's %.15g", train_tokens, tokens_per_step);
    throw InputError("--train-tokens", what, "at least one step's tokens (global batch x sequence length)",
                     "give the whole run's tokens, e.g. 15T; a budget's M is 10^6, --global-batch-tokens' M is 2^20");
  }
}

TrainingRun CostOfTraining(double train_tokens, double tokens_per_s, int64_t devices, double price_per_device_hour) {
  SHARDSIM_CHECK(std::isfinite(train_tokens) && train_tokens > 0, "train_tokens must be finite and positive");
  SHARDSIM_CHECK(std::isfinite(tokens_per_s) && tokens_per_s > 0, "tokens_per_s must be finite and positive");
  SHARDSIM_CHECK(devices >= 1, "devices must be at least 1");
  SHARDSIM_CHECK(std::isfinite(price_per_device_hour) && price_per_device_hour >= 0, "price_per_device_hour must be finite and >= 0");
  TrainingRun run;
  run.tokens = train_tokens;
  run.tokens_per_s = tokens_per_s;
  run.devices = devices;
  run.seconds = train_tokens / tokens_per_s;
  run.device_hours = run.seconds * static_cast<double>(devices) / 3600;
  run.priced = price_per_device_hour > 0;
  run.price_per_device_hour = price_per_device_hour;
  run.cost = run.priced ? run.device_hours * price_per_device_hour : 0;
  return run;
}

std::string DescribeTrainingRun(const TrainingRun& run) {
  std::string line = FormatCount(run.tokens) + " tokens in " + FormatDuration(run.seconds) + " at " + FormatCount(run.tokens_per_s) +
                     " tokens/s: " + FormatCount(run.device_hours) + " device-hours on " + std::to_string(run.devices) + " devices";
  if (run.priced) {
    line += "; cost " + FormatCount(run.cost) + " at " + FormatCount(run.price_per_device_hour) + " per device-hour (in the price's currency)";
  }
  return line;
}

nlohmann::json TrainingRunJson(const TrainingRun& run) {
  return {{"tokens", run.tokens},
          {"tokens_per_s", run.tokens_per_s},
          {"devices", run.devices},
          {"seconds", run.seconds},
          {"days", run.seconds / 86400},
          {"device_hours", run.device_hours},
          {"price_per_device_hour", run.priced ? nlohmann::json(run.price_per_device_hour) : nlohmann::json(nullptr)},
          {"cost", run.priced ? nlohmann::json(run.cost) : nlohmann::json(nullptr)}};
}

}  // namespace shardsim
