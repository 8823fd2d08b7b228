// The subcommands, each a function of its parsed options that writes to `out` and returns the
// exit status. Options are plain values, so commands do not see CLI11.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace shardsim::cli {

struct PresetsOptions {
  bool json = false;
};
int RunPresets(const PresetsOptions& options, std::ostream& out);

struct DescribeOptions {
  std::string model;
  std::string cluster;
  std::string plan;
  std::vector<std::string> overrides;  // --set key=value
  std::string mesh;                    // "data=8,tensor=8": show the links each axis uses
  int64_t seq_len = 0;                 // 0: the plan's, else the model's max_seq_len
  bool json = false;
  std::string write_model;    // write the model as shardsim model JSON to this file
  std::string write_cluster;  // write the cluster as cluster JSON to this file
  std::string write_plan;     // write the plan (after --set) as plan JSON to this file
};
int RunDescribe(const DescribeOptions& options, std::ostream& out);

}  // namespace shardsim::cli
