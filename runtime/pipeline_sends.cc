#include "runtime/pipeline_sends.h"

#include <iterator>

#include "runtime/memory_account.h"

namespace shardsim::runtime {

std::vector<float>& PipelineSends::Next(int64_t count) {
  sends_.push_back({std::vector<float>(static_cast<size_t>(count)), MPI_REQUEST_NULL});
  return sends_.back().data;
}

void PipelineSends::Start(int dest, int tag, const std::string& what) {
  Send& send = sends_.back();
  send.request = comms_.StartSend(send.data.data(), static_cast<int64_t>(send.data.size()), dest, tag, what);
}

void PipelineSends::Reap() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    CheckMpi(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), comms_.world(), "pipeline send");
    it = done ? sends_.erase(it) : std::next(it);
  }
}

void PipelineSends::WaitAll(const std::string& what) {
  for (Send& send : sends_) comms_.Wait(&send.request, what);
  sends_.clear();
}

int64_t PipelineSends::HeldBytes() const {
  int64_t bytes = 0;
  for (const Send& send : sends_) bytes += runtime::HeldBytes(send.data);
  return bytes;
}

}  // namespace shardsim::runtime
