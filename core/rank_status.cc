#include "core/rank_status.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

namespace shardsim {
namespace {

std::string FileOf(const std::string& folder, int rank) { return folder + "/rank-" + std::to_string(rank); }

}  // namespace

RankStatus::RankStatus(const std::string& folder, int rank) {
  if (folder.empty()) return;
  const int fd = ::open(FileOf(folder, rank).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  if (::ftruncate(fd, kSize) == 0) {
    void* map = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED) mapped_ = static_cast<char*>(map);
  }
  ::close(fd);  // the mapping stays
}

RankStatus::~RankStatus() {
  if (mapped_) ::munmap(mapped_, kSize);
}

void RankStatus::Write(const std::string& text) {
  const size_t n = std::min(text.size(), kSize - 1);
  std::memcpy(local_, text.data(), n);
  local_[n] = '\0';
  // The page survives the process: a rank killed now leaves this text for its launcher.
  if (mapped_) std::memcpy(mapped_, local_, n + 1);
}

void RankStatus::SetOp(int64_t step, const std::string& key) { Write("step " + std::to_string(step) + ", op " + key); }

void RankStatus::SetPhase(const std::string& phase) { Write(phase); }

std::string RankStatus::Text() const { return local_; }

std::string ReadRankStatus(const std::string& folder, int rank) {
  std::ifstream in(FileOf(folder, rank), std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text = text.substr(0, text.find('\0'));
  // Only printable text reaches a message (a write cut short by the kill may leave a torn tail).
  text.erase(std::remove_if(text.begin(), text.end(), [](char c) { return c < 32 || c > 126; }), text.end());
  return text;
}

}  // namespace shardsim
