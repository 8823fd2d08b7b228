#include "runtime/trace.h"

#include <nlohmann/json.hpp>

#include "strategies/op_keys.h"

namespace shardsim::runtime {

std::string ChromeTrace(const std::vector<std::vector<TraceEvent>>& events_by_rank) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t rank = 0; rank < events_by_rank.size(); ++rank) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", rank}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
    for (const TraceEvent& e : events_by_rank[rank]) {
      // The key's parts are also arguments, so a trace viewer can filter by op or micro-batch.
      const std::vector<std::string> parts = strategies::SplitOpKey(e.key);
      nlohmann::json args = {{"key", e.key}, {"step", e.step}};
      if (!e.kind.empty()) args["kind"] = e.kind;
      if (parts.size() == 4) args.update({{"stage", parts[0]}, {"layer", parts[1]}, {"op", parts[2]}, {"microbatch", parts[3]}});
      events.push_back({{"name", parts.size() == 4 ? parts[2] : e.key},
                        {"cat", e.category},
                        {"ph", "X"},
                        {"ts", e.start_s * 1e6},
                        {"dur", e.duration_s * 1e6},
                        {"pid", 0},
                        {"tid", rank},
                        {"args", args}});
    }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace shardsim::runtime
