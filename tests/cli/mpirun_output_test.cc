// mpirun's stderr sorted and summarised (cli/mpirun_output.h), from banners OpenMPI 4.1.4 printed
// on this machine for a rank killed by SIGKILL, a rank that called MPI_Abort, a rank that exited
// non-zero, and a launch without enough slots.
#include "cli/mpirun_output.h"

#include <gtest/gtest.h>

#include <sstream>

namespace shardsim::cli {
namespace {

const char* kRule = "--------------------------------------------------------------------------";

// Feeds `text` line by line; returns the lines shown to the user.
std::vector<std::string> Feed(MpirunOutput& output, const std::string& text) {
  std::vector<std::string> shown;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (output.Take(line)) shown.push_back(line);
  }
  output.Finish();
  return shown;
}

std::string Banner(const std::string& body) { return std::string(kRule) + "\n" + body + "\n" + kRule + "\n"; }

TEST(MpirunOutputTest, AKilledRankIsNamedAndTheBannersHidden) {
  MpirunOutput output;
  const auto shown = Feed(output, "step   0  loss 5.5\n" +
                                      Banner("Primary job  terminated normally, but 1 process returned\na non-zero exit code. Per user-direction, the job has been aborted.") +
                                      Banner("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."));
  EXPECT_EQ(shown, std::vector<std::string>{"step   0  loss 5.5"});
  EXPECT_EQ(output.news().killed_rank, 1);
  EXPECT_EQ(output.news().BlamedRank(), 1);
  EXPECT_EQ(FailureLine(output.news(), 137, "step 3, op 0/1/attention/2"),
            "rank 1 (node vm) was killed by signal 9 (Killed) during step 3, op 0/1/attention/2; mpirun stopped the other ranks");
}

TEST(MpirunOutputTest, ARanksOwnErrorLineIsTheOnlyLine) {
  MpirunOutput output;
  const auto shown = Feed(output, "shardsim-runtime: error: rank 0: timed out after 3 s waiting for x\n"
                                  "shardsim-runtime: error: rank 1: timed out after 3 s waiting for y\n"
                                  "[vm:22744] [[13350,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer\n" +
                                      Banner("MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode 4.\n\nNOTE: invoking MPI_ABORT ..."));
  ASSERT_EQ(shown.size(), 1u);
  EXPECT_EQ(output.news().aborted_rank, 0);
  EXPECT_EQ(output.news().abort_code, 4);
  EXPECT_EQ(FailureLine(output.news(), 4, ""), "");
}

TEST(MpirunOutputTest, AbortsAndExitsWithoutALineAreExplained) {
  MpirunOutput aborted;
  Feed(aborted, Banner("MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\nwith errorcode 3."));
  EXPECT_EQ(FailureLine(aborted.news(), 3, "start-up"), "rank 2 stopped the job (MPI_Abort, error code 3) during start-up");
  MpirunOutput failed;
  Feed(failed, Banner("mpirun detected that one or more processes exited with non-zero status, thus causing\nthe job to be terminated. The first "
                      "process to do so was:\n\n  Process name: [[12527,1],1]\n  Exit code:    2"));
  EXPECT_EQ(FailureLine(failed.news(), 2, ""), "rank 1 exited with status 2");
}

TEST(MpirunOutputTest, OtherBannersGiveTheirFirstParagraph) {
  MpirunOutput output;
  Feed(output, Banner("There are not enough slots available in the system to satisfy the 2\nslots that were requested by the application:\n\n  true\n\nEither "
                      "request fewer slots"));
  EXPECT_EQ(FailureLine(output.news(), 1, ""), "mpirun: There are not enough slots available in the system to satisfy the 2 slots that were requested by the application:");
  EXPECT_EQ(FailureLine(MpirunNews{}, 0, ""), "");
  EXPECT_EQ(FailureLine(MpirunNews{}, 1, ""), "mpirun failed with exit status 1 and said nothing");
}

}  // namespace
}  // namespace shardsim::cli
