// A whole training run as a step prediction implies it: the time to train on a token budget at
// the predicted tokens/s, the device-hours that takes, and their cost at a price per device-hour.
// `estimate` and `plan` (--train-tokens, --price-per-device-hour) both report it from here.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace shardsim {

struct TrainingRun {
  double tokens = 0;                 // the token budget trained on
  double seconds = 0;                // tokens / tokens_per_s: steady-state steps only (no restarts, evaluation or warm-up)
  double device_hours = 0;           // seconds x devices / 3600
  double cost = 0;                   // device_hours x price_per_device_hour, in the price's currency; 0 unless priced
  bool priced = false;               // a price per device-hour was given
  double tokens_per_s = 0;           // the rate it was computed at
  int64_t devices = 0;               // devices held for the whole run
  double price_per_device_hour = 0;  // 0 unless priced
};

// The run that trains `train_tokens` tokens at `tokens_per_s` on `devices` devices, priced when
// `price_per_device_hour` > 0 (0: not priced).
// REQUIRES: train_tokens and tokens_per_s finite and > 0; devices >= 1; price_per_device_hour
// finite and >= 0 (the CLI checks what users type; a broken caller aborts).
TrainingRun CostOfTraining(double train_tokens, double tokens_per_s, int64_t devices, double price_per_device_hour);

// Refuses a token budget below one step's tokens (--train-tokens): a run that does not finish a
// step has no time at the step's rate.
void CheckTrainTokens(double train_tokens, double tokens_per_step);

// One line for people: "15 T tokens in 41.34 days at 4.2 M tokens/s: 63.49 K device-hours on 64
// devices; cost 158.7 K at 2.5 per device-hour (in the price's currency)"; the cost part only when
// priced.
std::string DescribeTrainingRun(const TrainingRun& run);

// {"tokens", "tokens_per_s", "devices", "seconds", "days", "device_hours", "price_per_device_hour",
// "cost"}: the last two null unless priced; cost in the currency of the price given.
nlohmann::json TrainingRunJson(const TrainingRun& run);

}  // namespace shardsim
