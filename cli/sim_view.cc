#include "cli/sim_view.h"

#include <charconv>
#include <string_view>

#include "cli/plan_text.h"
#include "core/plan_spec.h"
#include "strategies/op_names.h"

namespace shardsim::cli {
namespace {

// The stage a key names ("3/12/qkv/5" -> 3), or -1 when its first part is not a number.
int64_t KeyStage(const std::string& key) {
  const std::string_view head = std::string_view(key).substr(0, key.find('/'));
  int64_t stage = -1;
  const auto [end, error] = std::from_chars(head.data(), head.data() + head.size(), stage);
  if (error != std::errc() || end != head.data() + head.size() || head.empty()) return -1;
  return stage;
}

}  // namespace

std::map<int64_t, int64_t> DeviceStages(const sim::SimReport& report) {
  std::map<int64_t, int64_t> stages;
  for (const sim::DeviceUse& use : report.devices) stages[use.rank] = use.stage;
  for (const sim::TimelineEvent& event : report.events) {
    if (stages.count(event.device) != 0) continue;
    const int64_t stage = KeyStage(event.key);
    if (stage >= 0) stages[event.device] = stage;
  }
  for (const sim::TimelineEvent& event : report.events) stages.try_emplace(event.device, 0);
  return stages;
}

std::vector<int64_t> DrawnDevices(const sim::SimReport& report) {
  const std::map<int64_t, int64_t> stages = DeviceStages(report);
  std::map<int64_t, int64_t> lowest_by_stage;
  for (const sim::TimelineEvent& event : report.events) {
    const int64_t stage = stages.at(event.device);
    auto [it, inserted] = lowest_by_stage.try_emplace(stage, event.device);
    if (!inserted && event.device < it->second) it->second = event.device;
  }
  std::vector<int64_t> devices;
  for (const auto& [stage, rank] : lowest_by_stage) devices.push_back(rank);
  return devices;
}

bool IsPipelineReceive(const sim::TimelineEvent& event) {
  return event.name == strategies::ops::kRecvForward ||
         event.name == strategies::ops::kRecvBackward;
}

std::string EventCategory(const sim::TimelineEvent& event) {
  if (event.name == "wait" || event.name.rfind("wait ", 0) == 0) return "wait";
  if (event.stream == strategies::Stream::kPipeline || IsPipelineReceive(event)) return "pipeline";
  if (event.stream == strategies::Stream::kCompute) return "compute";
  return "collective";
}

std::string PlanSummary(const strategies::StepProgram& program) {
  const PlanSpec& plan = program.plan;
  std::string text = DescribeMesh(plan.mesh) + ScheduleInHeader(plan);
  text += ", " + std::to_string(program.microbatches) + (program.microbatches == 1 ? " micro-batch of " : " micro-batches of ") +
          std::to_string(plan.micro_batch_size);
  text += ", seq " + std::to_string(plan.seq_len) + ", ZeRO " + std::to_string(plan.zero_stage) +
          ", recompute " + RecomputeText(plan);
  if (plan.sequence_parallel) text += ", sequence parallel";
  text += ExpertAxesNote(plan);
  return text + ", " + plan.dtype;
}

}  // namespace shardsim::cli
