// Sharded training checkpoints that are complete or absent, and refused when damaged.
//
// Layout of a checkpoint folder DIR:
//   DIR/checkpoint.json        the manifest: which step folder is the checkpoint, the ranks, the
//                              model (core's ModelToJson) and plan (PlanToJson), each rank file's
//                              size and CRC-32. Replaced atomically; a folder without it holds no
//                              checkpoint.
//   DIR/step-000120/rank-R.bin one file per rank (format below).
//
// Saving (collective): every rank writes DIR/step-NNNNNN/rank-R.bin.tmp, fsyncs it, renames it
// to rank-R.bin and fsyncs the folder; the ranks then agree on the outcome with a non-blocking
// all-reduce under the runtime's timeout. When a rank failed, the lowest failing rank's message
// is broadcast and every rank removes its files of this save and throws the same InputError
// (the manifest still names the previous step folder, which is untouched). When all succeeded,
// rank 0 writes the manifest (temporary file, fsync, rename, folder fsync: the atomic switch),
// the ranks agree on that too, and step folders the manifest does not name are removed.
//
// Rank file (version 2), all integers little-endian:
//   8 bytes   magic "SHSIMCKP"
//   u32       format version (2)
//   u32       header length H
//   H bytes   header JSON: {"format", "version", "step", "rank", "ranks", "model", "plan",
//             "arrays": [{"name", "count"}], "payload_bytes", "payload_crc32"}
//   u32       CRC-32 of the H header bytes
//   payload   the arrays' float32 values, one after another, in the header's order
// The CRC-32 is Boost.CRC's crc_32_type (the zlib/PNG polynomial).
//
// Resuming (collective): rank 0 reads the manifest and broadcasts it; every rank checks that it
// names this job's world size, model and plan, then reads its own file into scratch buffers and
// checks its header (magic, version, rank, ranks, step, model, plan, array sizes), its length,
// both checksums (the file's and the manifest's) and that every value is finite and within
// kMaxCheckpointValue. The ranks agree as when saving; only when every rank's file is good are
// the values copied into the training state, so a refused resume changes nothing, on disk or in
// memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "runtime/checkpoint_files.h"
#include "runtime/comm.h"

namespace shardsim::runtime {

inline constexpr const char* kCheckpointManifest = "checkpoint.json";
// The largest magnitude a stored value may have. AdamW moves a parameter by at most about lr
// (<= 1) per step and the moments hold clipped gradients, so a state beyond this is damage (or a
// run that diverged long before), never training.
inline constexpr double kMaxCheckpointValue = 1e15;

// One array of a rank's training state, saved and restored by name, in order.
struct CheckpointArray {
  std::string name;
  std::vector<float>* values = nullptr;
};

// What the checkpoint code needs of a trainer: its communicators (rank, world, the timed wait),
// the model and plan it must match, and the arrays that hold its state.
struct CheckpointSubject {
  MeshComms* comms = nullptr;
  const ModelSpec* model = nullptr;
  const PlanSpec* plan = nullptr;
  std::vector<CheckpointArray> arrays;
};

// Writes the state after `step` steps into `dir` (protocol above). `flag` names the input in
// errors ("--checkpoint"). Throws the same InputError on every rank when any rank cannot write
// its file or rank 0 cannot switch the manifest; the previous checkpoint is then kept.
// Collective.
void SaveCheckpoint(const CheckpointSubject& subject, const std::string& dir, int64_t step, const std::string& flag = "--checkpoint");

// Restores the state from the checkpoint in `dir` and returns its step. Throws the same
// InputError on every rank (naming the rank, the file and what differs) when any rank's check
// fails; nothing is changed then. Collective.
int64_t LoadCheckpoint(const CheckpointSubject& subject, const std::string& dir, const std::string& flag = "--resume");

// Before training: `dir` can be created and written by every rank (a test file is written,
// synced and removed on each). Throws the same InputError on every rank otherwise. Collective.
void CheckCheckpointFolder(MeshComms& comms, const std::string& dir, const std::string& flag = "--checkpoint");
// Before training: `dir` is a folder on every rank and holds a manifest (read by rank 0, which
// the others take theirs from). Collective.
void CheckResumeFolder(MeshComms& comms, const std::string& dir, const std::string& flag = "--resume");


}  // namespace shardsim::runtime
