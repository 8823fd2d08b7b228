#include "core/host_resources.h"

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace shardsim {

int64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    int64_t kib = 0;
    if (words >> name >> kib && name == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

int64_t UsableCores() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int64_t>(n);
}

}  // namespace shardsim
