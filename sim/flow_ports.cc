#include "sim/flow_ports.h"

#include <algorithm>
#include <mutex>
#include <string>

#include <simgrid/s4u.hpp>

#include "core/error.h"

namespace shardsim::sim {

namespace sg4 = simgrid::s4u;

struct FlowPorts::Batch {
  int64_t remaining = 0;  // chunks not yet arrived
  sg4::ConditionVariablePtr cv = sg4::ConditionVariable::create();
};

struct FlowPorts::Courier {
  sg4::ConditionVariablePtr cv = sg4::ConditionVariable::create();
  const FlowStep* step = nullptr;  // the chunk to carry: flows [begin, end) of step
  size_t begin = 0, end = 0;
  Batch* batch = nullptr;          // nullptr while idle
};

FlowPorts::FlowPorts(const std::vector<sg4::Host*>& hosts, const std::vector<int64_t>& devices, sg4::MutexPtr mutex, int64_t direct_flows)
    : hosts_(hosts), mutex_(std::move(mutex)), box_(hosts.size(), nullptr), direct_flows_(direct_flows) {
  for (int64_t d : devices) {
    const size_t i = static_cast<size_t>(d);
    if (box_[i] || !hosts_[i]) continue;
    box_[i] = sg4::Mailbox::by_name("flows" + std::to_string(d));
    sg4::Mailbox* box = box_[i];
    // The drain never ends on its own: Stop kills it once every flow has arrived.
    sg4::ActorPtr drain = sg4::Actor::create("drain" + std::to_string(d), hosts_[i], [box] {
      while (true) box->get<int>();
    });
    box->set_receiver(drain);
    drains_.push_back(drain);
  }
}

FlowPorts::~FlowPorts() = default;

int64_t FlowPorts::Launch(const FlowStep& step) {
  int64_t flows = 0;
  for (size_t i = 0; i < step.src.size(); ++i) flows += step.src[i] != step.dst[i] ? 1 : 0;
  if (flows == 0) return 0;
  if (direct_in_flight_ + flows <= direct_flows_) {
    // Few host-to-host comms in flight: the global list stays short, and sendto costs less than
    // handing the flows to couriers.
    direct_in_flight_ += flows;
    std::vector<sg4::CommPtr> comms;
    comms.reserve(static_cast<size_t>(flows));
    for (size_t i = 0; i < step.src.size(); ++i) {
      if (step.src[i] == step.dst[i]) continue;
      comms.push_back(sg4::Comm::sendto_async(hosts_[static_cast<size_t>(step.src[i])], hosts_[static_cast<size_t>(step.dst[i])],
                                              static_cast<uint64_t>(step.bytes[i])));
    }
    sg4::Comm::wait_all(comms);
    direct_in_flight_ -= flows;
    return flows;
  }
  Batch batch;
  std::unique_lock<sg4::Mutex> lock(*mutex_);
  for (size_t begin = 0; begin < step.src.size(); begin += static_cast<size_t>(kFlowChunk)) {
    const bool fresh = idle_.empty();
    if (fresh) couriers_.push_back(std::make_unique<Courier>());
    Courier* courier = fresh ? couriers_.back().get() : idle_.back();
    if (!fresh) idle_.pop_back();
    courier->step = &step;
    courier->begin = begin;
    courier->end = std::min(step.src.size(), begin + static_cast<size_t>(kFlowChunk));
    courier->batch = &batch;
    ++batch.remaining;
    if (fresh) {
      sg4::Actor::create("courier" + std::to_string(couriers_.size()), hosts_[static_cast<size_t>(step.src[begin])],
                         [this, courier] { CourierLoop(courier); });
    } else {
      courier->cv->notify_one();
    }
  }
  while (batch.remaining > 0) batch.cv->wait(lock);
  return flows;
}

void FlowPorts::CourierLoop(Courier* courier) {
  std::vector<sg4::CommPtr> comms;
  while (true) {
    {
      std::unique_lock<sg4::Mutex> lock(*mutex_);
      while (!courier->batch && !stopping_) courier->cv->wait(lock);
      if (!courier->batch) return;
    }
    const FlowStep& step = *courier->step;
    for (size_t i = courier->begin; i < courier->end; ++i) {
      const size_t src = static_cast<size_t>(step.src[i]), dst = static_cast<size_t>(step.dst[i]);
      if (src == dst) continue;
      if (sg4::this_actor::get_host() != hosts_[src]) sg4::this_actor::set_host(hosts_[src]);
      comms.push_back(box_[dst]->put_async(&payload_, static_cast<uint64_t>(step.bytes[i])));
    }
    sg4::Comm::wait_all(comms);
    comms.clear();
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    Batch* batch = courier->batch;
    courier->batch = nullptr;
    idle_.push_back(courier);
    if (--batch->remaining == 0) batch->cv->notify_all();
  }
}

void FlowPorts::Stop() {
  // Killing a drain cancels the comm it waits for: there must be none left in flight.
  SHARDSIM_CHECK(direct_in_flight_ == 0 && idle_.size() == couriers_.size(), "flow ports stopped with flows in flight");
  {
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    stopping_ = true;
    for (Courier* courier : idle_) courier->cv->notify_all();
  }
  for (sg4::ActorPtr& drain : drains_) drain->kill();
  for (sg4::Mailbox* box : box_) {
    if (box) box->set_receiver(nullptr);
  }
  drains_.clear();
}

}  // namespace shardsim::sim
