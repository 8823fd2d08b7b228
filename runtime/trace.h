// Measured events of a training step, named with the step program's op keys
// (stage/layer/op/microbatch, e.g. "0/3/tp_exit_attention/5"), written as a Chrome trace (the
// format Perfetto and chrome://tracing read) with one track per rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/rank_status.h"

namespace shardsim::runtime {

struct TraceEvent {
  std::string key;       // stage/layer/op/microbatch ("-" for a step-level op's layer or micro-batch)
  std::string category;  // compute, tensor, data, pipeline, optimizer
  double start_s = 0;    // since the tracer was made
  double duration_s = 0;
  int64_t step = 0;      // the training step it belongs to (keys repeat from step to step)
  std::string kind = "";  // the program op's kind: "compute" or "all-gather over tensor" (set when gathered)
};

class Tracer {
 public:
  Tracer() : origin_(std::chrono::steady_clock::now()) {}
  double Now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count(); }
  // Every span counts towards its category's total; it is kept as an event when enabled.
  void Add(std::string key, std::string category, double start_s, double end_s) {
    totals_[category] += end_s - start_s;
    if (enabled_) events_.push_back({std::move(key), std::move(category), start_s, end_s - start_s, step_});
  }
  // Keeps an event without counting it in the totals (time already inside another span).
  void Record(std::string key, std::string category, double start_s, double end_s) {
    if (enabled_) events_.push_back({std::move(key), std::move(category), start_s, end_s - start_s, step_});
  }
  // Moves `seconds` of a span's time from one category's total to another's (time spent waiting
  // inside a span of another kind, as ring attention's transfers inside its compute span).
  void Reassign(const std::string& from, const std::string& to, double seconds) {
    totals_[from] -= seconds;
    totals_[to] += seconds;
  }
  // Seconds per category since the last call, and a fresh start.
  std::map<std::string, double> TakeTotals() { return std::exchange(totals_, {}); }
  // The key of the innermost span open now ("" outside any): what a collective issued now belongs to.
  const std::string& current_key() const {
    static const std::string kNone;
    return open_.empty() ? kNone : open_.back();
  }
  void Open(const std::string& key) {
    open_.push_back(key);
    if (status_) status_->SetOp(step_, key);
  }
  void Close() {
    open_.pop_back();
    if (status_ && !open_.empty()) status_->SetOp(step_, open_.back());
  }
  // Where the op in progress is posted for the launcher (rank_status.h); null: nowhere.
  void set_status(RankStatus* status) { status_ = status; }
  void set_enabled(bool enabled) { enabled_ = enabled; }
  // The step the following events belong to.
  void set_step(int64_t step) { step_ = step; }
  bool enabled() const { return enabled_; }
  const std::vector<TraceEvent>& events() const { return events_; }

 private:
  std::chrono::steady_clock::time_point origin_;
  bool enabled_ = false;
  std::vector<TraceEvent> events_;
  std::map<std::string, double> totals_;
  std::vector<std::string> open_;  // keys of the spans open now, innermost last
  int64_t step_ = 0;
  RankStatus* status_ = nullptr;
};

// Times [construction, destruction) into the tracer's category totals, and records it as one
// event when the tracer is enabled.
class TraceSpan {
 public:
  TraceSpan(Tracer* tracer, std::string key, std::string category)
      : tracer_(tracer), key_(std::move(key)), category_(std::move(category)), start_s_(tracer ? tracer->Now() : 0) {
    if (tracer_) tracer_->Open(key_);
  }
  ~TraceSpan() {
    if (!tracer_) return;
    tracer_->Close();
    tracer_->Add(std::move(key_), std::move(category_), start_s_, tracer_->Now());
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Tracer* tracer_;
  std::string key_, category_;
  double start_s_;
};

// The Chrome trace JSON of every rank's events (events_by_rank[r] from rank r).
std::string ChromeTrace(const std::vector<std::vector<TraceEvent>>& events_by_rank);

}  // namespace shardsim::runtime
