// What each rank of a job is doing now, kept where its launcher can read it after the rank dies:
// `shardsim run` gives the ranks a folder (SHARDSIM_STATUS_DIR); each rank maps a small file
// there and writes its step and the op key of its innermost open span into it as it goes (a
// memory write, no system call), so that a rank killed by a signal is named with the op it was in.
// No MPI here: the CLI reads what the runtime writes.
#pragma once

#include <cstdint>
#include <string>

namespace shardsim {

// The environment variable that names the folder.
inline constexpr const char* kRankStatusFolderVariable = "SHARDSIM_STATUS_DIR";

class RankStatus {
 public:
  // Mirrors the status into `folder`/rank-`rank` when `folder` is not empty and the file can be
  // made; otherwise keeps it in memory only.
  RankStatus(const std::string& folder, int rank);
  ~RankStatus();
  RankStatus(const RankStatus&) = delete;
  RankStatus& operator=(const RankStatus&) = delete;

  // "step 3, op 0/1/attention/2" (step counted from 0, the op key of the step program).
  void SetOp(int64_t step, const std::string& key);
  // A phase outside the step's ops: "starting", "saving the checkpoint", "finished".
  void SetPhase(const std::string& phase);
  std::string Text() const;

 private:
  static constexpr size_t kSize = 256;
  void Write(const std::string& text);
  char local_[kSize] = {};
  char* mapped_ = nullptr;
};

// What rank `rank` last wrote into `folder` ("" when it wrote nothing).
std::string ReadRankStatus(const std::string& folder, int rank);

}  // namespace shardsim
