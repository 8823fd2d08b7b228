// The engine's result as plain records on the pipe from the simulating child to its parent.
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "sim/step_engine.h"

namespace shardsim::sim {
namespace {

// Plain-record serialization between the simulating child and its parent.
class Writer {
 public:
  template <typename T>
  void Put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  template <typename T>
  void PutVector(const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put(static_cast<uint64_t>(values.size()));
    out_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T Get() {
    T value;
    Need(sizeof value);
    std::memcpy(&value, in_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  template <typename T>
  std::vector<T> GetVector() {
    const uint64_t n = Get<uint64_t>();
    Need(n * sizeof(T));
    std::vector<T> values(n);
    if (n > 0) std::memcpy(values.data(), in_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return values;
  }

 private:
  void Need(size_t bytes) const {
    if (at_ + bytes > in_.size()) throw std::runtime_error("the simulation process returned a truncated result");
  }
  const std::string& in_;
  size_t at_ = 0;
};

}  // namespace

std::string Serialize(const EngineResult& r) {
  Writer w;
  w.PutVector(r.sets);
  w.Put(static_cast<uint64_t>(r.comm_runs.size()));
  for (size_t s = 0; s < r.comm_runs.size(); ++s) {
    w.PutVector(r.comm_runs[s]);
    w.PutVector(r.comm_seconds[s]);
    w.PutVector(r.send_runs[s]);
    w.PutVector(r.send_seconds[s]);
  }
  w.Put(r.flows);
  w.Put(r.activities);
  w.Put(r.wall_s);
  w.Put(r.peak_rss_bytes);
  w.PutVector(r.events);
  return w.Take();
}

EngineResult Deserialize(const std::string& bytes) {
  Reader in(bytes);
  EngineResult r;
  r.sets = in.GetVector<SetResult>();
  const uint64_t sets = in.Get<uint64_t>();
  for (uint64_t s = 0; s < sets; ++s) {
    r.comm_runs.push_back(in.GetVector<int64_t>());
    r.comm_seconds.push_back(in.GetVector<double>());
    r.send_runs.push_back(in.GetVector<int64_t>());
    r.send_seconds.push_back(in.GetVector<double>());
  }
  r.flows = in.Get<int64_t>();
  r.activities = in.Get<int64_t>();
  r.wall_s = in.Get<double>();
  r.peak_rss_bytes = in.Get<int64_t>();
  r.events = in.GetVector<RawEvent>();
  return r;
}

}  // namespace shardsim::sim
