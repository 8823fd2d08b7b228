// What the step simulation runs, prepared before any SimGrid engine starts (no SimGrid here):
// the simulated devices and the actors standing for them, each layer phase as a list of actions
// (compute runs, blocking and overlapped collectives), each collective resolved to the flows it
// puts on the routed links, the pipeline transfers, and the folding decisions with their reasons.
// Internal to sim/ (sim/simulate.h is the interface).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mesh.h"
#include "sim/op_cost.h"
#include "strategies/step_program.h"

namespace shardsim::sim {

// One step of a collective's flow schedule, every simulated group's flows at once.
struct FlowStep {
  std::vector<int64_t> src, dst;  // devices
  std::vector<double> bytes;      // per flow (the step's identical rounds folded into one)
  double sleep_s = 0;             // (rounds - 1) x the slowest route's latency
};

// One collective as one actor set runs it.
struct CommPlan {
  const strategies::Op* op = nullptr;
  int kind = 0;                  // index into StepSetup::kinds
  double bytes = 0;              // nccl-tests size (a bucket's share for step-level buckets)
  double uncontended_s = 0;      // the analytic model's time
  std::vector<int64_t> group;    // the representative group's ranks
  int64_t rendezvous = 0;        // id shared by the actor sets of the same group (and op)
  int64_t members = 1;           // actor sets that meet in it
  std::vector<FlowStep> steps;
  int64_t flows = 0;
};

// A run of actions of one layer program's phase. Compute runs merge consecutive compute ops.
// kFused: a tensor collective overlapped with its own product (strategies::OverlapPartner),
// posted right before that product's compute action, which waits for it when it ends; where
// collectives hide under parts of the product (Op::partner_from, partner_to), the product is one
// compute action per part, each collective posted before its part and waited for after it.
struct Action {
  enum Kind : uint8_t { kCompute, kBlocking, kOverlapped, kFused } kind = kCompute;
  double seconds = 0;             // compute: the run's roofline seconds
  int32_t first_op = 0, ops = 0;  // compute: ops [first_op, first_op + ops) of the layer program
  int32_t op = -1;                // collectives: index of the op in the layer program
  int32_t fused = 0;              // compute: the kFused collectives posted just before, waited for after
  bool part = false;              // compute: a share of its one op (seconds), merged with nothing
};

// A pipeline transfer from one stage to another, as one actor set sends it.
struct PipeSend {
  int64_t to_stage = 0;
  int64_t receiver = 0;           // actor set
  FlowStep flows;
  double uncontended_s = 0;
};

// One actor set: a stage's representative standing for its devices (folded), or one device.
struct ActorSet {
  int64_t rank = 0;               // the device whose host its actors run on
  int64_t stage = 0;
  std::vector<int64_t> devices;   // the devices it stands for
  // Per layer program (strategies::LayerRun::program) and op (index into its ops): collectives,
  // -1 if none.
  std::array<std::vector<int32_t>, strategies::kLayerPrograms> layer_comm;
  std::vector<int32_t> step_comm;       // per step op (blocking ones and overlapped buckets)
  // What the last backward loses to the overlapped step collectives' kernels
  // (OverlappedStepReduction's borrowed seconds, as the estimate counts them).
  double step_borrowed_s = 0;
  std::vector<CommPlan> comms;          // all of them
  std::vector<PipeSend> sends;          // per destination stage
};

// A communication kind: the mesh axes a collective runs over, or the pipeline's neighbours.
struct CommKind {
  std::string name;   // "tensor", "data,fsdp", "pipeline"
  std::vector<std::string> axes;
  std::vector<bool> folded;  // per stage
};

struct StepSetup {
  const strategies::StepProgram* program = nullptr;
  Roofline roofline;
  std::vector<CommKind> kinds;
  std::vector<ActorSet> sets;
  std::vector<int64_t> set_of_rank;   // rank -> actor set (-1 when folded away)
  // Per layer program (strategies::LayerRun::program) and phase (F, B, W, R): its actions.
  std::array<std::array<std::vector<Action>, 4>, strategies::kLayerPrograms> actions;
  std::vector<int64_t> stage_layers;  // per stage: layer entries (the gradient buckets)
  std::vector<double> stage_last_backward_s;  // per stage: one micro-batch's backward, all chunks (the estimate's)
  std::vector<std::string> folded, simulated;  // in words
  std::vector<int64_t> hosts;         // every device that sends or receives, and each set's rank
  bool fold = true;
  const topologies::Cluster* graph = nullptr;
  // Routes of every (source, destination) pair a flow uses: link ids in order.
  std::unordered_map<uint64_t, std::vector<int64_t>> routes;
  const std::vector<int64_t>& Route(int64_t src, int64_t dst) const;
};

// Index of a phase in StepSetup::actions.
inline int ActionPhase(strategies::Phase phase) { return static_cast<int>(phase); }

StepSetup PrepareStep(const strategies::StepProgram& program, const ClusterSpec& cluster, const topologies::Cluster& graph,
                      AxisCollectives& collectives, bool fold);

}  // namespace shardsim::sim
