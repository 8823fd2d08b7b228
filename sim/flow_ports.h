// Puts a step's flows on the routed links for the step engine (sim/step_engine.cc), so that no
// SimGrid activity list grows long with the flows in flight. Internal to sim/.
//
// Why not Comm::sendto: SimGrid 3.32 keeps every host-to-host comm (always detached) in one global
// std::list and CommImpl::finish removes each finished comm with list::remove, a scan of every
// comm in flight. With thousands of flows at once (a collective step on a 4,096-chip torus) that
// scan was most of the simulation's wall time (perf: 55% on llama3-70b, tpu-v5p:16x16x8, 81% on
// 16x16x16). Mailbox comms sit in the lists of the actors that put and get them instead, so the
// ports keep those lists short:
//  - each host has a drain actor, the permanent receiver of the host's mailbox: a put to it
//    starts at once (no rendezvous to wait for) and the drain takes finished comms off it;
//  - a launch hands its flows in chunks of at most kFlowChunk to courier actors; a courier moves to
//    each flow's source host before putting it (the comm leaves from the putting actor's host),
//    then waits for its chunk.
// The flows, their routes, sizes and start times are the same as sendto's, which launches still
// use while at most `direct_flows` host-to-host comms would be in flight (cheaper than couriers
// for small launches; SimulateOptions::direct_flows).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <simgrid/forward.h>

#include "sim/step_setup.h"

namespace shardsim::sim {

// Flows a courier carries at once (self-flows in its share are skipped).
inline constexpr int64_t kFlowChunk = 16;

class FlowPorts {
 public:
  // `hosts` by device (nullptr where none); a drain on each of `devices`; `mutex` the engine's,
  // which Launch and the couriers take.
  FlowPorts(const std::vector<simgrid::s4u::Host*>& hosts, const std::vector<int64_t>& devices, simgrid::s4u::MutexPtr mutex,
            int64_t direct_flows);
  ~FlowPorts();
  FlowPorts(const FlowPorts&) = delete;
  FlowPorts& operator=(const FlowPorts&) = delete;

  // Puts every flow of `step` on the links and returns once all have arrived; called by an actor.
  // Returns the flows put (those between distinct devices).
  int64_t Launch(const FlowStep& step);

  // Ends the drain and courier actors; called without the engine's mutex by the last actor to
  // finish, once every launch has returned (checked).
  void Stop();

  int64_t actors() const { return static_cast<int64_t>(drains_.size() + couriers_.size()); }

 private:
  struct Batch;
  struct Courier;
  void CourierLoop(Courier* courier);

  const std::vector<simgrid::s4u::Host*>& hosts_;
  simgrid::s4u::MutexPtr mutex_;
  std::vector<simgrid::s4u::Mailbox*> box_;  // by device
  std::vector<simgrid::s4u::ActorPtr> drains_;
  std::vector<std::unique_ptr<Courier>> couriers_;
  std::vector<Courier*> idle_;
  int64_t direct_flows_;
  int64_t direct_in_flight_ = 0;  // sendto comms of launches not yet returned
  bool stopping_ = false;
  int payload_ = 0;
};

}  // namespace shardsim::sim
