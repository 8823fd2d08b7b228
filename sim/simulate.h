// sim::Simulate: one training step played out event by event on SimGrid (S4U, CM02 flows) over
// the cluster's routed links. The same per-op costs as the estimate (sim/op_cost.h); what
// differs is only what a discrete-event engine adds: compute and per-kind communication
// streams per device that run at once, collectives as the collective engine's flow schedules
// that share links with every other flow in flight, the exact schedule order per stage, and
// step-level gradient buckets released as the last backward proceeds.
//
// Folding (the symmetry rule, docs/simulate.md):
// - Every device of a pipeline stage runs the same ops in the same order, so one actor set
//   per stage stands for all of them (the stage's representative device: its lowest rank);
//   with `fold` off, every device has its own actors.
// - The flows of a communication kind (the mesh axes of a collective, or the pipeline's
//   neighbour pairs) on a stage run for one group only when that kind's groups there use
//   pairwise disjoint links with the same link profile and none of their links carries any
//   other group of any kind; otherwise every group's flows are simulated, so all traffic
//   that shares a link with other traffic is in the simulation.
// - The pipeline's steady state repeats: as the estimate does (sim/schedule_player.h), a
//   prefix of the micro-batches is simulated and a shorter one, and the step extended at the
//   rate between the two (off with `every_microbatch`).
// No SimGrid type leaves sim/: the engine runs in forked child processes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/des_budget.h"
#include "sim/estimate.h"

namespace shardsim::sim {

struct SimulateOptions {
  bool fold = true;               // false: every device simulated (small clusters)
  bool every_microbatch = false;  // true: no steady-state extension
  bool timeline = false;          // keep every op's events (for --trace and --report)
  bool progress = false;          // a progress line on stderr once a simulation passes a second
                                  // (the caller checks that stderr is a terminal)
  // Most host-to-host comms in flight before a launch's flows go through the flow ports instead
  // (sim/flow_ports.h): the same flows either way, only the wall time differs (the tests run
  // both paths: 0 and a number no step reaches).
  int64_t direct_flows = 256;
  DesLimits limits;               // wall time and memory the simulation may take: refused
                                  // beforehand when its estimate passes them, stopped when it does
};

// One op on one stream of one simulated device, as the timeline shows it.
struct TimelineEvent {
  int64_t device = 0;  // rank
  strategies::Stream stream = strategies::Stream::kCompute;
  std::string key;     // stage/layer/op/microbatch (strategies/op_keys.h); "-" for step-level
  std::string name;    // the op's name in the step program, or "wait <what>" for a stall
  double start_s = 0, end_s = 0;
  bool is_comm = false;
  // Collectives:
  CollectiveOp collective = CollectiveOp::kAllReduce;
  std::string axes;                // "tensor", "data,fsdp", "pipeline"
  double bytes = 0;                // nccl-tests size
  std::vector<int64_t> group;      // ranks of the group
  double uncontended_s = 0;        // the analytic model's time for it alone
  // Pipeline transfers: the same id on the send and on the receive it feeds.
  int64_t flow_id = -1;
  bool flow_start = false;  // true on the send, false on the receiving task
};

// Per simulated device: seconds busy per stream, and the compute stream's idle split.
struct DeviceUse {
  int64_t rank = 0;
  int64_t stage = 0;
  int64_t represents = 1;         // devices it stands for (1 unfolded)
  double stream_busy_s[strategies::kStreams] = {};   // by strategies::Stream
  double compute_s = 0;           // compute ops
  double exposed_comm_s = 0;      // compute stream blocked on collectives
  double bubble_s = 0;            // compute stream idle over the step (pipeline bubble and the wait for
                                  // the slowest stage at the end): step time - compute - exposed
  double waiting_s = 0;           // of which waiting for pipeline inputs
  double overlapped_comm_s = 0;   // communication under compute
  double memory_bytes = 0;        // peak per the memory model
};

struct LinkUse {
  int64_t link = -1;    // id in topologies::Cluster::links()
  std::string name;
  double busy_s = 0;    // bytes carried / (bandwidth x efficiency), over the simulated step
  double utilisation = 0;  // busy_s / step time
  std::vector<std::string> kinds;  // the communication kinds whose flows crossed it
  int64_t senders = 0;  // distinct devices whose flows crossed it
};

// What ran slower than alone: a communication kind's collectives took `slowdown` times their
// uncontended time, on links they shared with other kinds.
struct Contention {
  std::string kind;       // "data all-reduce over data"
  double simulated_s = 0, uncontended_s = 0;  // per step, summed over the critical stage
  std::vector<std::string> links;  // the shared links they crossed (names), busiest first
  std::vector<std::string> with;   // the other kinds on those links
};

struct SimReport {
  StepReport step;                 // the estimate's fields, from the simulated timeline
  StepReport estimate;             // the analytic estimate of the same step (the baseline)
  std::vector<DeviceUse> devices;  // simulated devices
  std::vector<LinkUse> links;      // links that carried traffic, busiest first
  std::vector<Contention> contention;
  // Folding, in words: what one simulated group or device stood for, and what ran explicitly.
  std::vector<std::string> folded;
  std::vector<std::string> simulated;
  int64_t simulated_devices = 0;   // with actors
  int64_t represented_devices = 0; // all of the cluster's devices in the plan
  int64_t microbatches_simulated = 0, microbatches = 0;
  int64_t flows = 0;               // SimGrid transfers
  int64_t activities = 0;          // executions + transfers + waits
  DesLoad engine_load;             // what the simulation created (both plays), counted beforehand
  DesEstimate engine_estimate;     // its wall time and memory, estimated beforehand
  double wall_s = 0;               // wall time of the simulation (children included)
  int64_t peak_rss_bytes = 0;      // largest simulating process
  std::vector<TimelineEvent> events;  // SimulateOptions::timeline: the longer play's events
  double timeline_end_s = 0;          // when the simulated (unextended) timeline ends
};

// Simulates one step of `program` on `cluster` (its graph `graph`), costing ops as Estimate does
// with `collectives`. Throws InputError naming the limit when the simulation's estimated cost
// passes `options.limits` (before any engine starts) or the running simulation does (its
// processes killed); std::runtime_error when a simulation process fails.
SimReport Simulate(const strategies::StepProgram& program, const ClusterSpec& cluster, const topologies::Cluster& graph, AxisCollectives& collectives,
                   const SimulateOptions& options = {});

}  // namespace shardsim::sim
