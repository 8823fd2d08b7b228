// What mpirun writes on stderr, sorted: the ranks' own lines pass through to the user; mpirun's
// boxed banners and the ranks' "[host:pid]" backtrace lines are read for what they say about the
// job (which rank died of which signal, which rank aborted, which exited non-zero, why mpirun could
// not start) and kept out of the terminal, so that a failed job ends in one line.
#pragma once

#include <string>
#include <vector>

namespace shardsim::cli {

// What mpirun's banners said.
struct MpirunNews {
  int killed_rank = -1;  // a rank that died of a signal
  int signal = 0;
  std::string signal_name, node;
  int aborted_rank = -1;  // a rank that called MPI_Abort
  int abort_code = 0;
  int failed_rank = -1;  // the first rank that exited non-zero
  int exit_code = 0;
  std::vector<std::string> other;  // banners not understood, each as one line
  bool runtime_error = false;  // a rank printed its own "shardsim-runtime: error:" line
  // The rank the failure is pinned on (killed, aborted or failed, in that order), or -1.
  int BlamedRank() const { return killed_rank >= 0 ? killed_rank : aborted_rank >= 0 ? aborted_rank : failed_rank; }
};

class MpirunOutput {
 public:
  // Takes one line (without its newline); returns true when the user should see it.
  bool Take(const std::string& line);
  // Call at the end (closes a banner cut short).
  const MpirunNews& Finish();
  const MpirunNews& news() const { return news_; }

 private:
  void Read(const std::string& banner);
  bool in_banner_ = false;
  std::string banner_;
  MpirunNews news_;
};

// The one line that explains a job that did not end well, or "" when nothing is left to say (the
// job succeeded, or a rank already printed its error). `rank_status` says what the blamed rank
// was doing last ("step 3, op 0/1/attention/2"; "" when unknown).
std::string FailureLine(const MpirunNews& news, int mpirun_exit, const std::string& rank_status);

}  // namespace shardsim::cli
