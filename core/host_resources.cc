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

namespace {

int64_t StatusKib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    int64_t kib = 0;
    if (words >> name >> kib && name == field) return kib * 1024;
  }
  return -1;
}

}  // namespace

int64_t ProcessResidentBytes() { return StatusKib("VmRSS:"); }

int64_t ProcessPeakResidentBytes() { return StatusKib("VmHWM:"); }

bool ResetProcessPeakResident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

int64_t UsableCores() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int64_t>(n);
}

}  // namespace shardsim
