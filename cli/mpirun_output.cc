#include "cli/mpirun_output.h"

#include <regex>

namespace shardsim::cli {
namespace {

bool IsRule(const std::string& line) { return line.size() >= 20 && line.find_first_not_of('-') == std::string::npos; }

// "[vm:21221] *** Process received signal ***", "[vm:22744] [[13350,0],0] ORTE_ERROR_LOG: ...".
bool IsProcessNoise(const std::string& line) {
  static const std::regex noise(R"(^\[[^\]\s]+:\d+\].*)");
  return std::regex_match(line, noise);
}

std::string Collapse(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\t') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

bool MpirunOutput::Take(const std::string& line) {
  if (IsRule(line)) {
    if (in_banner_) Read(banner_);
    in_banner_ = !in_banner_;
    banner_.clear();
    return false;
  }
  if (in_banner_) {
    banner_ += line + "\n";
    return false;
  }
  if (IsProcessNoise(line)) return false;
  if (line.rfind("shardsim-runtime: error:", 0) == 0) {
    // The first error is the cause; a later one is its consequence (a stopped rank, continued by
    // mpirun's abort, finds its own wait over time before it is ended).
    if (news_.runtime_error) return false;
    news_.runtime_error = true;
  }
  return true;
}

const MpirunNews& MpirunOutput::Finish() {
  if (in_banner_ && !banner_.empty()) Read(banner_);
  in_banner_ = false;
  banner_.clear();
  return news_;
}

void MpirunOutput::Read(const std::string& banner) {
  if (banner.empty()) return;
  const std::string text = Collapse(banner);
  std::smatch m;
  static const std::regex killed(R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+) \(([^)]*)\))");
  static const std::regex aborted(R"(MPI_ABORT was invoked on rank (\d+) in communicator \S+ with errorcode (-?\d+))");
  static const std::regex failed(R"(Process name: \[\[\d+,\d+\],(\d+)\] Exit code: (-?\d+))");
  static const std::regex routine(R"(^(Primary job terminated normally|mpirun has exited due to process rank))");
  if (std::regex_search(text, m, killed)) {
    if (news_.killed_rank < 0) {
      news_.killed_rank = std::stoi(m[1]);
      news_.node = m[2];
      news_.signal = std::stoi(m[3]);
      news_.signal_name = m[4];
    }
  } else if (std::regex_search(text, m, aborted)) {
    if (news_.aborted_rank < 0) news_.aborted_rank = std::stoi(m[1]), news_.abort_code = std::stoi(m[2]);
  } else if (std::regex_search(text, m, failed)) {
    if (news_.failed_rank < 0) news_.failed_rank = std::stoi(m[1]), news_.exit_code = std::stoi(m[2]);
  } else if (!std::regex_search(text, routine)) {
    // The banner's first paragraph says what went wrong ("There are not enough slots ...").
    const size_t paragraph = banner.find("\n\n");
    news_.other.push_back(Collapse(banner.substr(0, paragraph)));
  }
}

std::string FailureLine(const MpirunNews& news, int mpirun_exit, const std::string& rank_status) {
  if (news.runtime_error) return "";  // a rank's own line said it (what followed are its consequences)
  const std::string during = rank_status.empty() ? "" : " during " + rank_status;
  if (news.killed_rank >= 0) {
    return "rank " + std::to_string(news.killed_rank) + " (node " + news.node + ") was killed by signal " + std::to_string(news.signal) + " (" +
           news.signal_name + ")" + during + "; mpirun stopped the other ranks";
  }
  if (news.aborted_rank >= 0) {
    return "rank " + std::to_string(news.aborted_rank) + " stopped the job (MPI_Abort, error code " + std::to_string(news.abort_code) + ")" + during;
  }
  if (news.failed_rank >= 0) {
    return "rank " + std::to_string(news.failed_rank) + " exited with status " + std::to_string(news.exit_code) + during;
  }
  if (!news.other.empty()) return "mpirun: " + news.other.front();
  if (mpirun_exit != 0) return "mpirun failed with exit status " + std::to_string(mpirun_exit) + " and said nothing";
  return "";
}

}  // namespace shardsim::cli
