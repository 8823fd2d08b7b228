#include "core/host_resources.h"

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace shardsim {

namespace {

// The "NAME: N kB" line `field` of a /proc file in bytes, or -1.
int64_t ProcKib(const char* path, const std::string& field) {
  std::ifstream in(path);
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

int64_t AvailableMemoryBytes() { return ProcKib("/proc/meminfo", "MemAvailable:"); }

int64_t ProcessResidentBytes() { return ProcKib("/proc/self/status", "VmRSS:"); }

int64_t ProcessPeakResidentBytes() { return ProcKib("/proc/self/status", "VmHWM:"); }

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
