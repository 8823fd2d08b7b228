// Puts a step's flows on the routed links for the step engine (sim/step_engine.cc), so that no
// SimGrid activity list grows with the flows in flight. Internal to sim/.
//
// Why not Comm::sendto: SimGrid 3.32 keeps every host-to-host comm (always detached) in one global
// std::list and CommImpl::finish removes each finished comm with list::remove, a scan of every
// comm in flight. With thousands of flows at once (a collective step on a 4,096-chip torus) that
// scan was most of the simulation's wall time (55% on tpu-v5p:16x16x8). Mailbox comms sit in the
// lists of the actors that put and get them instead, so the ports keep those lists short:
//  - each receiving host has a drain actor, the permanent receiver of the host's mailbox: a put
//    to it starts at once (no rendezvous to wait for) and the drain takes finished comms off it;
//  - a launch hands its flows in chunks of at most kFlowChunk to courier actors; a courier moves to
//    each flow's source host before putting it (the comm leaves from the putting actor's host),
//    then waits for its chunk.
// The flows, their routes, sizes and start times are the same as sendto's, which launches still
// use while few host-to-host comms are in flight (cheaper than couriers for small launches).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <simgrid/forward.h>

#include "sim/step_setup.h"

namespace shardsim::sim {

// Flows a courier carries at once; launches put directly (sendto) while the host-to-host comms
// in flight, theirs included, stay at most kDirectFlows.
inline constexpr int64_t kFlowChunk = 16;
inline constexpr int64_t kDirectFlows = 256;

class FlowPorts {
 public:
  // `hosts` by device (nullptr where none), `receivers` the devices that flows go to.
  FlowPorts(const std::vector<simgrid::s4u::Host*>& hosts, const std::vector<int64_t>& receivers, simgrid::s4u::MutexPtr mutex);
  ~FlowPorts();
  FlowPorts(const FlowPorts&) = delete;
  FlowPorts& operator=(const FlowPorts&) = delete;

  // Puts every flow of `step` on the links and returns once all have arrived; called by an actor.
  // Returns the flows put (those between distinct devices).
  int64_t Launch(const FlowStep& step);

  // Ends the drain and courier actors; called by the last actor to finish, after every launch.
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
  int64_t direct_in_flight_ = 0;  // sendto comms of launches not yet returned
  bool stopping_ = false;
  int payload_ = 0, stop_ = 0;
};

}  // namespace shardsim::sim
