#include "sim/step_engine.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <stdexcept>
#include <unordered_set>

#include <simgrid/s4u.hpp>

#include "core/error.h"
#include "sim/child_process.h"
#include "sim/flow_ports.h"
#include "sim/schedule_player.h"
#include "strategies/schedule.h"

namespace shardsim::sim {
namespace {

namespace sg4 = simgrid::s4u;
using strategies::LayerKind;
using strategies::Op;
using strategies::Phase;
using strategies::Stream;

constexpr double kSpeed = 1e9;  // host speed: an op of s seconds is an execution of s x 1e9 flops

// An overlapped collective posted to a communication stream, or a pipeline transfer.
struct Item {
  int32_t comm = -1;  // CommPlan (collectives) or PipeSend index (transfers)
  bool done = false;
  RawEvent event;     // filled as it runs
  uint64_t arrival = 0;  // transfers: the receiver's input key
  int64_t receiver = -1;
};

class StepEngine {
 public:
  StepEngine(const StepSetup& setup, int64_t microbatches, bool timeline, bool progress, int64_t direct_flows)
      : setup_(setup), program_(*setup.program), count_(microbatches), timeline_(timeline), progress_(progress), direct_flows_(direct_flows),
        path_(PathOf(program_)) {}

  EngineResult Run() {
    std::vector<std::string> args = SimGridArguments("shardsim-step");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    sg4::Engine engine(&argc, argv.data());
    BuildPlatform();
    mutex_ = sg4::Mutex::create();
    ports_ = std::make_unique<FlowPorts>(host_, setup_.hosts, mutex_, direct_flows_);
    const auto& lists = task_lists_.Get(program_, count_);
    tasks_ = &lists;
    // Progress counts layers of tasks, the unit the compute actors advance by.
    for (const ActorSet& set : setup_.sets) {
      for (const strategies::Task& task : lists[static_cast<size_t>(set.stage)]) {
        for (const auto& [kind, n, sixteen_bit] : program_.stages[static_cast<size_t>(set.stage)].chunks[static_cast<size_t>(task.chunk)].layers) total_tasks_ += n;
      }
    }
    result_.sets.resize(setup_.sets.size());
    states_.resize(setup_.sets.size());
    for (size_t s = 0; s < setup_.sets.size(); ++s) {
      const ActorSet& set = setup_.sets[s];
      SetState& state = states_[s];
      state.cv = sg4::ConditionVariable::create();
      state.seq.assign(set.comms.size(), 0);
      result_.comm_runs.emplace_back(set.comms.size(), 0);
      result_.comm_seconds.emplace_back(set.comms.size(), 0.0);
      result_.send_runs.emplace_back(set.sends.size(), 0);
      result_.send_seconds.emplace_back(set.sends.size(), 0.0);
      state.send_queues.resize(set.sends.size());
      for (size_t i = 0; i < set.sends.size(); ++i) {
        state.send_queues[i].cv = sg4::ConditionVariable::create();
        sg4::Actor::create("send" + std::to_string(s) + "-" + std::to_string(i), host_[static_cast<size_t>(set.rank)], [this, s, i] { SendActor(s, i); });
      }
      for (size_t st = 0; st < state.streams.size(); ++st) {
        state.streams[st].cv = sg4::ConditionVariable::create();
        sg4::Actor::create("stream" + std::to_string(s) + "-" + std::to_string(st), host_[static_cast<size_t>(set.rank)],
                           [this, s, st] { StreamActor(s, st); });
      }
      sg4::Actor::create("compute" + std::to_string(s), host_[static_cast<size_t>(set.rank)], [this, s] { ComputeActor(s); });
    }
    wall_start_ = std::chrono::steady_clock::now();
    engine.run();
    ports_.reset();
    if (printed_) std::fprintf(stderr, "\r%60s\r", "");
    result_.wall_s = Wall();
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    result_.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
    return std::move(result_);
  }

 private:
  struct Queue {
    std::deque<Item*> items;
    sg4::ConditionVariablePtr cv;
  };
  struct SetState {
    std::unordered_set<uint64_t> arrived;
    sg4::ConditionVariablePtr cv;  // the compute actor waits here
    std::array<Queue, strategies::kStreams> streams;  // by Stream
    std::vector<Queue> send_queues;
    std::vector<int64_t> seq;      // per CommPlan: executions so far
    std::deque<Item> items;        // storage (stable addresses)
  };
  struct Rendezvous {
    int64_t arrived = 0;
    bool done = false;
    sg4::ConditionVariablePtr cv;
  };

  double Wall() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count(); }
  static double Now() { return sg4::Engine::get_clock(); }

  void BuildPlatform() {
    sg4::NetZone* zone = sg4::create_full_zone("cluster");
    host_.assign(static_cast<size_t>(setup_.graph->num_devices()), nullptr);
    for (int64_t d : setup_.hosts) host_[static_cast<size_t>(d)] = zone->create_host("d" + std::to_string(d), kSpeed);
    std::vector<sg4::Link*> links(setup_.graph->links().size(), nullptr);
    const int64_t n = setup_.graph->num_devices();
    for (const auto& [key, route] : setup_.routes) {
      const int64_t src = static_cast<int64_t>(key / static_cast<uint64_t>(n)), dst = static_cast<int64_t>(key % static_cast<uint64_t>(n));
      if (src == dst || !host_[static_cast<size_t>(src)] || !host_[static_cast<size_t>(dst)]) continue;
      std::vector<sg4::LinkInRoute> hops;
      for (int64_t id : route) {
        sg4::Link*& link = links[static_cast<size_t>(id)];
        if (!link) {
          const topologies::Link& l = setup_.graph->links()[static_cast<size_t>(id)];
          link = zone->create_link("l" + std::to_string(id), l.bandwidth_bytes_per_s * l.efficiency)->set_latency(l.latency_s);
          link->seal();
        }
        hops.emplace_back(link);
      }
      zone->add_route(host_[static_cast<size_t>(src)]->get_netpoint(), host_[static_cast<size_t>(dst)]->get_netpoint(), nullptr, nullptr, hops, false);
    }
    zone->seal();
  }

  // Puts one step's flows on the links and waits for all of them.
  void Launch(const FlowStep& step) {
    if (step.sleep_s > 0) sg4::this_actor::sleep_for(step.sleep_s);
    const int64_t flows = ports_->Launch(step);
    result_.flows += flows;
    result_.activities += flows;
  }

  // Puts every step of collective `comm` of set `s` on the links, counting it and its time.
  void Launch(size_t s, int32_t comm) {
    const double start = Now();
    for (const FlowStep& step : setup_.sets[s].comms[static_cast<size_t>(comm)].steps) Launch(step);
    ++result_.comm_runs[s][static_cast<size_t>(comm)];
    result_.comm_seconds[s][static_cast<size_t>(comm)] += Now() - start;
  }

  // Runs collective `comm` of set `s`; when several actor sets meet in it, the last to arrive
  // puts every flow on the links and the others wait for it.
  void RunComm(size_t s, int32_t comm) {
    const CommPlan& plan = setup_.sets[s].comms[static_cast<size_t>(comm)];
    const int64_t seq = states_[s].seq[static_cast<size_t>(comm)]++;
    if (plan.members > 1) {
      std::unique_lock<sg4::Mutex> lock(*mutex_);
      const auto key = std::make_pair(plan.rendezvous, seq);
      Rendezvous& r = rendezvous_[key];
      if (!r.cv) r.cv = sg4::ConditionVariable::create();
      if (++r.arrived < plan.members) {
        while (!r.done) r.cv->wait(lock);
        if (--r.arrived == 0) rendezvous_.erase(key);
        return;
      }
      lock.unlock();
      Launch(s, comm);
      lock.lock();
      r.done = true;
      r.cv->notify_all();
      if (--r.arrived == 0) rendezvous_.erase(key);
    } else {
      Launch(s, comm);
    }
  }

  void Record(const RawEvent& event) {
    if (timeline_) result_.events.push_back(event);
  }

  // Waits for the next item of `queue`; nullptr once every compute actor is done (nothing more
  // comes: every transfer was received and every collective waited for).
  Item* Pop(Queue& queue) {
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    while (queue.items.empty() && !stopping_) queue.cv->wait(lock);
    if (queue.items.empty()) return nullptr;
    Item* item = queue.items.front();
    queue.items.pop_front();
    return item;
  }

  void StreamActor(size_t s, size_t stream) {
    SetState& state = states_[s];
    Queue& queue = state.streams[stream];
    while (true) {
      Item* item = Pop(queue);
      if (!item) return;
      item->event.start_s = Now();
      RunComm(s, item->comm);
      item->event.end_s = Now();
      const double seconds = item->event.end_s - item->event.start_s;
      result_.sets[s].stream_busy_s[stream] += seconds;
      result_.sets[s].overlapped_issued_s += seconds;
      Record(item->event);
      std::unique_lock<sg4::Mutex> lock(*mutex_);
      item->done = true;
      state.cv->notify_all();
    }
  }

  void SendActor(size_t s, size_t index) {
    Queue& queue = states_[s].send_queues[index];
    const PipeSend& send = setup_.sets[s].sends[index];
    while (true) {
      Item* item = Pop(queue);
      if (!item) return;
      item->event.start_s = Now();
      Launch(send.flows);
      item->event.end_s = Now();
      result_.send_runs[s][index] += 1;
      result_.send_seconds[s][index] += item->event.end_s - item->event.start_s;
      result_.sets[s].stream_busy_s[static_cast<size_t>(Stream::kPipeline)] += item->event.end_s - item->event.start_s;
      Record(item->event);
      std::unique_lock<sg4::Mutex> lock(*mutex_);
      SetState& receiver = states_[static_cast<size_t>(item->receiver)];
      receiver.arrived.insert(item->arrival);
      receiver.cv->notify_all();
    }
  }

  Item* Post(size_t s, Queue& queue, Item item) {
    SetState& state = states_[s];
    state.items.push_back(item);
    Item* posted = &state.items.back();
    posted->event.start_s = Now();
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    queue.items.push_back(posted);
    queue.cv->notify_all();
    return posted;
  }

  // Blocks the compute stream until `item` is done; the wait is exposed communication.
  void WaitFor(size_t s, Item* item, const Op& op) {
    const double start = Now();
    {
      std::unique_lock<sg4::Mutex> lock(*mutex_);
      while (!item->done) states_[s].cv->wait(lock);
    }
    const double waited = Now() - start;
    if (waited <= 0) return;
    SetResult& r = result_.sets[s];
    r.exposed[op] += waited;
    r.comm_waited_s += waited;
    RawEvent event = item->event;
    event.waited = 1;
    event.stream = static_cast<int8_t>(Stream::kCompute);
    event.waited_kind = static_cast<int32_t>(ExposedByKind::Index(op.stream, op.collective));
    event.start_s = start;
    event.end_s = Now();
    Record(event);
  }

  uint64_t ArrivalKey(int ph, int64_t slot, int64_t mb) const {
    const uint64_t slots = path_.before.size();
    return (static_cast<uint64_t>(ph) * slots + static_cast<uint64_t>(slot)) * static_cast<uint64_t>(count_) + static_cast<uint64_t>(mb);
  }

  void WaitInput(size_t s, int ph, int64_t slot, int64_t chunk, int64_t mb) {
    const uint64_t key = ArrivalKey(ph, slot, mb);
    const double start = Now();
    {
      std::unique_lock<sg4::Mutex> lock(*mutex_);
      while (!states_[s].arrived.count(key)) states_[s].cv->wait(lock);
      states_[s].arrived.erase(key);
    }
    const double waited = Now() - start;
    result_.sets[s].bubble_s += waited;
    RawEvent event;
    event.what = RawEvent::kReceive;
    event.stream = static_cast<int8_t>(Stream::kCompute);
    event.phase = static_cast<int8_t>(ph == 0 ? Phase::kForward : Phase::kBackwardInput);
    event.set = static_cast<int32_t>(s);
    event.label = static_cast<int32_t>(chunk);
    event.microbatch = static_cast<int32_t>(mb);
    event.flow_id = static_cast<int64_t>(key) * static_cast<int64_t>(setup_.sets.size()) + static_cast<int64_t>(s);
    event.start_s = start;
    event.end_s = Now();
    Record(event);
  }

  void SendTo(size_t s, int ph, int64_t from_chunk, int64_t to_slot, int64_t mb) {
    const ActorSet& set = setup_.sets[s];
    const int64_t to_stage = path_.StageOf(to_slot);
    size_t index = 0;
    while (index < set.sends.size() && set.sends[index].to_stage != to_stage) ++index;
    SHARDSIM_CHECK(index < set.sends.size(), "no pipeline transfer prepared to stage " + std::to_string(to_stage));
    Item item;
    item.comm = static_cast<int32_t>(index);
    item.arrival = ArrivalKey(ph, to_slot, mb);
    item.receiver = set.sends[index].receiver;
    item.event.what = RawEvent::kSend;
    item.event.stream = static_cast<int8_t>(Stream::kPipeline);
    item.event.phase = static_cast<int8_t>(ph == 0 ? Phase::kForward : Phase::kBackwardInput);
    item.event.set = static_cast<int32_t>(s);
    item.event.label = static_cast<int32_t>(from_chunk);
    item.event.microbatch = static_cast<int32_t>(mb);
    item.event.comm = static_cast<int32_t>(index);
    item.event.flow_id = static_cast<int64_t>(item.arrival) * static_cast<int64_t>(setup_.sets.size()) + item.receiver;
    Post(s, states_[s].send_queues[index], item);
  }

  // One layer program's ops of one phase: overlapped collectives posted at the phase's start,
  // compute runs and blocking collectives in order, then the wait for the overlapped ones; a
  // collective overlapped with its own product (a tensor collective's, a context K/V gather's
  // attention) is posted as its part of that product starts and waited for as the part ends.
  // `offloaded`: the layer's activations are offloaded (strategies::OffloadedLayers), so its host
  // copies run; other layers of the kind skip them. `program`: the layer program's index
  // (strategies::LayerRun::program).
  void RunPhase(size_t s, size_t program, Phase phase, int32_t label, int64_t mb, bool offloaded = false) {
    const auto& actions = setup_.actions[program][static_cast<size_t>(ActionPhase(phase))];
    if (actions.empty()) return;
    const auto& ops = program_.layer_programs[program].ops;
    const auto& comm_of = setup_.sets[s].layer_comm[program];
    RawEvent base;
    base.layer_program = static_cast<int8_t>(program);
    base.phase = static_cast<int8_t>(phase);
    base.set = static_cast<int32_t>(s);
    base.label = label;
    base.microbatch = static_cast<int32_t>(mb);
    auto post = [&](const Action& a) -> std::pair<Item*, const Op*> {
      const Op& op = ops[static_cast<size_t>(a.op)];
      Item item;
      item.comm = comm_of[static_cast<size_t>(a.op)];
      item.event = base;
      item.event.stream = static_cast<int8_t>(op.stream);
      item.event.op = a.op;
      item.event.comm = item.comm;
      return {Post(s, states_[s].streams[static_cast<size_t>(op.stream)], item), &op};
    };
    std::vector<std::pair<Item*, const Op*>> posted, fused;
    for (const Action& a : actions) {
      if (a.kind != Action::kOverlapped) continue;
      if (!offloaded && ops[static_cast<size_t>(a.op)].stream == Stream::kHost) continue;
      posted.push_back(post(a));
    }
    SetResult& r = result_.sets[s];
    for (const Action& a : actions) {
      if (a.kind == Action::kFused) {
        fused.push_back(post(a));
        continue;
      }
      if (a.kind == Action::kCompute) {
        const double start = Now();
        sg4::this_actor::execute(a.seconds * kSpeed);
        ++result_.activities;
        r.compute_s += a.seconds;
        if (timeline_) {
          double at = start;
          for (int32_t i = a.first_op; i < a.first_op + a.ops; ++i) {
            RawEvent event = base;
            event.op = i;
            event.start_s = at;
            at += a.part ? a.seconds : setup_.roofline.Seconds(ops[static_cast<size_t>(i)]);
            event.end_s = at;
            Record(event);
          }
        }
        for (const auto& [item, op] : fused) WaitFor(s, item, *op);
        fused.clear();
      } else if (a.kind == Action::kBlocking) {
        const Op& op = ops[static_cast<size_t>(a.op)];
        RawEvent event = base;
        event.stream = static_cast<int8_t>(op.stream);
        event.op = a.op;
        event.comm = comm_of[static_cast<size_t>(a.op)];
        event.start_s = Now();
        RunComm(s, event.comm);
        event.end_s = Now();
        r.exposed[op] += event.end_s - event.start_s;
        r.stream_busy_s[static_cast<size_t>(op.stream)] += event.end_s - event.start_s;
        Record(event);
      }
    }
    for (const auto& [item, op] : posted) WaitFor(s, item, *op);
  }

  void RunStepOp(size_t s, size_t i) {
    const ActorSet& set = setup_.sets[s];
    const Op& op = program_.stages[static_cast<size_t>(set.stage)].step_ops[i];
    RawEvent event;
    event.what = RawEvent::kStepOp;
    event.set = static_cast<int32_t>(s);
    event.op = static_cast<int32_t>(i);
    event.stream = static_cast<int8_t>(op.stream);
    event.start_s = Now();
    if (!op.is_comm()) {
      const double seconds = setup_.roofline.Seconds(op);
      sg4::this_actor::execute(seconds * kSpeed);
      ++result_.activities;
      result_.sets[s].compute_s += seconds;
    } else {
      if (set.step_comm[i] < 0) return;
      event.comm = set.step_comm[i];
      RunComm(s, event.comm);
      result_.sets[s].exposed[op] += Now() - event.start_s;
      result_.sets[s].stream_busy_s[static_cast<size_t>(op.stream)] += Now() - event.start_s;
    }
    event.end_s = Now();
    Record(event);
  }

  void ComputeActor(size_t s) {
    const ActorSet& set = setup_.sets[s];
    const int64_t stage = set.stage;
    const strategies::Stage& program_stage = program_.stages[static_cast<size_t>(stage)];
    const auto& step_ops = program_stage.step_ops;
    const auto& tasks = (*tasks_)[static_cast<size_t>(stage)];
    const int64_t v = path_.chunks;
    const bool split = program_.schedule->SplitsBackward();
    // Parameters gathered once per step go before the first forward.
    for (size_t i = 0; i < step_ops.size(); ++i) {
      if (step_ops[i].phase == Phase::kForward && !step_ops[i].overlapped) RunStepOp(s, i);
    }
    // Each chunk's last backward task releases the gradient buckets, one per layer.
    std::vector<size_t> last_backward(static_cast<size_t>(v), tasks.size());
    for (size_t t = 0; t < tasks.size(); ++t) {
      const Phase ph = tasks[t].phase;
      if (ph == Phase::kForward || (!split && ph == Phase::kBackwardWeight)) continue;
      last_backward[static_cast<size_t>(tasks[t].chunk)] = t;
    }
    std::vector<std::pair<Item*, const Op*>> buckets;
    for (size_t t = 0; t < tasks.size(); ++t) {
      const strategies::Task& task = tasks[t];
      const int ph = PhaseIndex(task.phase);
      // Without split backward, W runs with B layer by layer; its task has nothing left to do.
      if (!split && ph == 2) continue;
      const int64_t slot = stage * v + task.chunk, mb = task.microbatch;
      const int64_t before = path_.before[static_cast<size_t>(slot)], after = path_.after[static_cast<size_t>(slot)];
      if (ph == 0 && before >= 0 && path_.StageOf(before) != stage) WaitInput(s, 0, slot, task.chunk, mb);
      if (ph == 1 && after >= 0 && path_.StageOf(after) != stage) WaitInput(s, 1, slot, task.chunk, mb);
      const strategies::Chunk& chunk = program_stage.chunks[static_cast<size_t>(task.chunk)];
      struct Layer {
        size_t program;
        int32_t label;
        bool offloaded;
      };
      std::vector<Layer> layers;
      int32_t next = static_cast<int32_t>(chunk.layout.first_layer);
      const std::vector<int64_t> offload = strategies::OffloadedPerRun(program_.plan, chunk);
      for (size_t run = 0; run < chunk.layers.size(); ++run) {
        const strategies::LayerRun& r = chunk.layers[run];
        for (int64_t i = 0; i < r.count; ++i) {
          const bool offloaded = i < offload[run];
          layers.push_back({r.program(), r.kind == LayerKind::kEmbedding ? -1 : r.kind == LayerKind::kHead ? -2 : next++, offloaded});
        }
      }
      if (ph != 0) std::reverse(layers.begin(), layers.end());
      for (const auto& [program, label, offloaded] : layers) {
        ReportProgress();
        if (ph == 0) {
          RunPhase(s, program, Phase::kForward, label, mb, offloaded);
          continue;
        }
        if (ph == 1) {
          RunPhase(s, program, Phase::kRecompute, label, mb, offloaded);
          RunPhase(s, program, Phase::kBackwardInput, label, mb, offloaded);
        }
        if (ph == 2 || !split) RunPhase(s, program, Phase::kBackwardWeight, label, mb, offloaded);
        if (t != last_backward[static_cast<size_t>(task.chunk)]) continue;
        for (size_t i = 0; i < step_ops.size(); ++i) {
          if (!step_ops[i].overlapped || set.step_comm[i] < 0) continue;
          Item item;
          item.comm = set.step_comm[i];
          item.event.what = RawEvent::kStepOp;
          item.event.set = static_cast<int32_t>(s);
          item.event.op = static_cast<int32_t>(i);
          item.event.stream = static_cast<int8_t>(step_ops[i].stream);
          item.event.comm = item.comm;
          buckets.push_back({Post(s, states_[s].streams[static_cast<size_t>(step_ops[i].stream)], item), &step_ops[i]});
        }
      }
      if (ph == 0 && after >= 0 && path_.StageOf(after) != stage) SendTo(s, 0, task.chunk, after, mb);
      if (ph == 1 && before >= 0 && path_.StageOf(before) != stage) SendTo(s, 1, task.chunk, before, mb);
    }
    // The last backward's loss to the buckets' kernels (ActorSet::step_borrowed_s), as compute.
    if (setup_.sets[s].step_borrowed_s > 0) {
      sg4::this_actor::execute(setup_.sets[s].step_borrowed_s * kSpeed);
      ++result_.activities;
      result_.sets[s].compute_s += setup_.sets[s].step_borrowed_s;
    }
    for (const auto& [item, op] : buckets) WaitFor(s, item, *op);
    for (size_t i = 0; i < step_ops.size(); ++i) {
      if (step_ops[i].overlapped || (step_ops[i].phase == Phase::kForward && step_ops[i].is_comm())) continue;
      RunStepOp(s, i);
    }
    result_.sets[s].end_s = Now();
    // The last compute actor to finish lets the stream and transfer actors end (actors, not
    // daemons: SimGrid's thread contexts, used under the sanitizers, hang tearing daemons down).
    if (++finished_sets_ == setup_.sets.size()) {
      ports_->Stop();  // every launch has returned: no flow is in flight
      std::unique_lock<sg4::Mutex> lock(*mutex_);
      stopping_ = true;
      for (SetState& state : states_) {
        for (Queue& queue : state.streams) queue.cv->notify_all();
        for (Queue& queue : state.send_queues) queue.cv->notify_all();
      }
    }
  }

  void ReportProgress() {
    ++done_tasks_;
    if (!progress_ || done_tasks_ % 16 != 0) return;
    const double wall = Wall();
    if (wall < 1.0 || wall - last_print_ < 0.5) return;
    last_print_ = wall;
    printed_ = true;
    std::fprintf(stderr, "\rsimulating: %3.0f%% of %lld layer tasks, %.0f s", 100.0 * static_cast<double>(done_tasks_) / static_cast<double>(total_tasks_),
                 static_cast<long long>(total_tasks_), wall);
    std::fflush(stderr);
  }

  const StepSetup& setup_;
  const strategies::StepProgram& program_;
  int64_t count_;
  bool timeline_, progress_;
  int64_t direct_flows_;
  PipelinePath path_;
  strategies::TaskLists task_lists_;
  const strategies::TaskLists::Lists* tasks_ = nullptr;
  std::vector<sg4::Host*> host_;
  sg4::MutexPtr mutex_;
  std::unique_ptr<FlowPorts> ports_;
  std::vector<SetState> states_;
  std::map<std::pair<int64_t, int64_t>, Rendezvous> rendezvous_;
  EngineResult result_;
  std::chrono::steady_clock::time_point wall_start_;
  int64_t total_tasks_ = 0, done_tasks_ = 0;
  double last_print_ = 0;
  bool printed_ = false;
  bool stopping_ = false;
  size_t finished_sets_ = 0;
};

}  // namespace

EngineResult RunStepEngine(const StepSetup& setup, int64_t microbatches, bool timeline, bool progress, int64_t direct_flows) {
  return StepEngine(setup, microbatches, timeline, progress, direct_flows).Run();
}

}  // namespace shardsim::sim
