#include "runtime/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <boost/crc.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/output_file.h"
#include "core/model_json.h"
#include "core/plan_json.h"

namespace shardsim::runtime {

static_assert(std::endian::native == std::endian::little, "rank files store little-endian float32 as they are in memory");

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFormatName = "shardsim-checkpoint";
constexpr const char* kValid = "a complete checkpoint of the same model and plan";
constexpr const char* kDamagedHint = "resume from another copy of the checkpoint, or train again from the start";

// One rank's problem, to be agreed on: the InputError's parts but `where`, which the caller
// knows. Empty `what`: no problem.
struct Failure {
  std::string what, valid, hint;
};

std::string ErrnoText(int error) { return std::strerror(error); }

std::string SpaceHint(int error) {
  return error == ENOSPC || error == EDQUOT ? "free some space or write the checkpoint elsewhere" : "check that the folder exists and is writable";
}

// A value for a message: strings unquoted, numbers and the rest as JSON.
std::string Show(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

// Appends to `out` the fields where `saved` and `now` differ ("num_heads 8 in the checkpoint, 4
// now"), nested objects by dotted path.
void Differences(const json& saved, const json& now, const std::string& path, std::vector<std::string>& out) {
  if (saved == now) return;
  if (saved.is_object() && now.is_object()) {
    for (const auto& [key, value] : now.items()) {
      const std::string at = path.empty() ? key : path + "." + key;
      if (!saved.contains(key)) {
        out.push_back(at + " absent in the checkpoint, " + Show(value) + " now");
      } else {
        Differences(saved[key], value, at, out);
      }
    }
    for (const auto& [key, value] : saved.items()) {
      if (!now.contains(key)) out.push_back((path.empty() ? key : path + "." + key) + " " + Show(value) + " in the checkpoint, absent now");
    }
    return;
  }
  out.push_back(path + " " + Show(saved) + " in the checkpoint, " + Show(now) + " now");
}

std::string DescribeDifferences(const std::string& what, json saved, json now) {
  // The model's `source` only says where its figures come from.
  if (what == "model" && saved.is_object() && now.is_object()) saved.erase("source"), now.erase("source");
  std::vector<std::string> list;
  Differences(saved, now, "", list);
  if (list.empty()) return "";
  std::string text = what + " differs: ";
  const size_t shown = std::min<size_t>(list.size(), 4);
  for (size_t i = 0; i < shown; ++i) text += (i ? "; " : "") + list[i];
  if (list.size() > shown) text += "; and " + std::to_string(list.size() - shown) + " more";
  return text;
}

json ModelIdentity(const ModelSpec& model) { return ModelToJson(model); }

// The timed agreement: MPI collectives on the world, each waited on under the runtime's timeout.
class Agreement {
 public:
  explicit Agreement(MeshComms& comms) : comms_(comms) { MPI_Comm_size(comms.world(), &size_); }

  // Every rank passes its failure (empty `what` when none); every rank returns the lowest failing
  // rank's, or nullopt when none failed.
  std::optional<Failure> Agree(const Failure& mine, const std::string& what) {
    int lowest = mine.what.empty() ? size_ : comms_.rank();
    MPI_Request request;
    CheckMpi(MPI_Iallreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, comms_.world(), &request), comms_.world(), what);
    comms_.Wait(&request, what);
    if (lowest == size_) return std::nullopt;
    std::string text = lowest == comms_.rank() ? json::array({mine.what, mine.valid, mine.hint}).dump() : std::string();
    Broadcast(text, lowest, what + " (the failing rank's message)");
    const json parts = json::parse(text);
    return Failure{parts[0].get<std::string>(), parts[1].get<std::string>(), parts[2].get<std::string>()};
  }

  // `text` from `root` to every rank.
  void Broadcast(std::string& text, int root, const std::string& what) {
    int64_t length = static_cast<int64_t>(text.size());
    MPI_Request request;
    CheckMpi(MPI_Ibcast(&length, 1, MPI_INT64_T, root, comms_.world(), &request), comms_.world(), what);
    comms_.Wait(&request, what);
    text.resize(static_cast<size_t>(length));
    if (length == 0) return;
    CheckMpi(MPI_Ibcast(text.data(), static_cast<int>(length), MPI_CHAR, root, comms_.world(), &request), comms_.world(), what);
    comms_.Wait(&request, what);
  }

  // Every rank waits for every other (a barrier under the timeout).
  void Sync(const std::string& what) {
    MPI_Request request;
    CheckMpi(MPI_Ibarrier(comms_.world(), &request), comms_.world(), what);
    comms_.Wait(&request, what);
  }

  int size() const { return size_; }

 private:
  MeshComms& comms_;
  int size_ = 1;
};

// The checkpoint the folder holds now, as its manifest says (rank 0 reads it).
struct Live {
  int64_t step = -1;   // -1: none
  std::string folder;  // its step folder ("" for the earlier format, rank files beside the manifest)
};

Live ReadLive(const fs::path& root) {
  Live live;
  std::FILE* f = std::fopen((root / kCheckpointManifest).c_str(), "rb");
  if (!f) return live;
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) text.append(buffer, n);
  std::fclose(f);
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) return live;
  live.step = j["step"].get<int64_t>();
  if (j.contains("folder") && j["folder"].is_string()) live.folder = j["folder"].get<std::string>();
  return live;
}

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace

void SaveCheckpoint(const CheckpointSubject& subject, const std::string& dir, int64_t step, const std::string& flag) {
  MeshComms& comms = *subject.comms;
  Agreement agreement(comms);
  const int rank = comms.rank(), ranks = agreement.size();
  const std::string where = flag + " " + dir;
  const fs::path root(dir);

  // Rank 0 decides this save's folder (never the one the manifest names now: that checkpoint
  // stays whole until the switch) and what a failure keeps.
  std::string decided;
  if (rank == 0) {
    const Live live = ReadLive(root);
    std::string name = StepFolderName(step);
    if (name == live.folder) name += "-1";
    const std::string kept = live.step >= 0 ? "the checkpoint of step " + std::to_string(live.step) + " is kept"
                                            : "no earlier checkpoint was in " + dir;
    decided = json{{"folder", name}, {"live", live.folder}, {"kept", kept}}.dump();
  }
  agreement.Broadcast(decided, 0, "checkpoint folder broadcast");
  const json decision = json::parse(decided);
  const std::string name = decision["folder"].get<std::string>();
  const std::string kept = decision["kept"].get<std::string>();
  const fs::path folder = root / name;
  const fs::path file = folder / RankFileName(rank);
  const fs::path temp = file.string() + ".tmp";

  // This rank's file: header, payload straight from the training state.
  json arrays = json::array();
  boost::crc_32_type crc;
  uint64_t payload_bytes = 0;
  std::vector<Piece> pieces;
  for (const CheckpointArray& a : subject.arrays) {
    arrays.push_back({{"name", a.name}, {"count", a.values->size()}});
    const size_t bytes = a.values->size() * sizeof(float);
    crc.process_bytes(a.values->data(), bytes);
    payload_bytes += bytes;
  }
  const uint32_t payload_crc = crc.checksum();
  const json header{{"format", kFormatName},
                    {"version", kCheckpointVersion},
                    {"step", step},
                    {"rank", rank},
                    {"ranks", ranks},
                    {"model", ModelIdentity(*subject.model)},
                    {"plan", PlanToJson(*subject.plan)},
                    {"arrays", arrays},
                    {"payload_bytes", payload_bytes},
                    {"payload_crc32", payload_crc}};
  const std::string head = EncodeHead(header);
  pieces.push_back({head.data(), head.size()});
  for (const CheckpointArray& a : subject.arrays) pieces.push_back({a.values->data(), a.values->size() * sizeof(float)});

  Failure mine;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) {
    mine = {"rank " + std::to_string(rank) + " cannot create " + folder.string() + ": " + ec.message(), "", SpaceHint(ec.value())};
  } else if (const int error = WriteDurably(temp, file, pieces); error != 0) {
    mine = {"rank " + std::to_string(rank) + " cannot write " + file.string() + ": " + ErrnoText(error), "", SpaceHint(error)};
  }

  // Removes this save's files everywhere (after a failure).
  auto discard = [&] {
    std::error_code ignored;
    fs::remove(temp, ignored);
    fs::remove(file, ignored);
    agreement.Sync("checkpoint clean-up");
    if (rank == 0) fs::remove_all(folder, ignored);
  };
  auto fail = [&](const Failure& failure) {
    discard();
    throw InputError(where, failure.what + "; " + kept, failure.valid, failure.hint);
  };
  if (const std::optional<Failure> failure = agreement.Agree(mine, "checkpoint write agreement")) fail(*failure);

  // Every file is in place: rank 0 switches the manifest to it.
  const uint64_t file_bytes = head.size() + payload_bytes;
  uint64_t facts[2] = {file_bytes, payload_crc};
  std::vector<uint64_t> all(rank == 0 ? static_cast<size_t>(ranks) * 2 : 0);
  {
    MPI_Request request;
    CheckMpi(MPI_Igather(facts, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, 0, comms.world(), &request), comms.world(), "checkpoint checksum gather");
    comms.Wait(&request, "checkpoint checksum gather");
  }
  Failure manifest_failure;
  bool durable = true;  // the switch reached the disk (else old folders are kept)
  if (rank == 0) {
    json files = json::array();
    for (int r = 0; r < ranks; ++r) {
      files.push_back({{"rank", r},
                       {"file", RankFileName(r)},
                       {"bytes", all[static_cast<size_t>(r) * 2]},
                       {"payload_crc32", all[static_cast<size_t>(r) * 2 + 1]}});
    }
    const json manifest{{"format", kFormatName},
                        {"version", kCheckpointVersion},
                        {"step", step},
                        {"folder", name},
                        {"ranks", ranks},
                        {"model", ModelIdentity(*subject.model)},
                        {"plan", PlanToJson(*subject.plan)},
                        {"files", files}};
    const std::string text = manifest.dump(2) + "\n";
    const fs::path target = root / kCheckpointManifest;
    const fs::path manifest_temp = target.string() + ".tmp";
    const int fd = ::open(manifest_temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int error = fd < 0 ? errno : WriteFully(fd, text.data(), text.size());
    if (fd >= 0 && error == 0 && ::fsync(fd) != 0) error = errno;
    if (fd >= 0 && ::close(fd) != 0 && error == 0) error = errno;
    if (error == 0 && std::rename(manifest_temp.c_str(), target.c_str()) != 0) error = errno;
    if (error != 0) {
      ::unlink(manifest_temp.c_str());
      manifest_failure = {"rank 0 cannot write " + target.string() + ": " + ErrnoText(error), "", SpaceHint(error)};
    } else {
      // The switch happened; a folder that cannot be synced keeps the older step folders.
      durable = SyncFolder(root) == 0;
    }
  }
  if (const std::optional<Failure> failure = agreement.Agree(manifest_failure, "checkpoint manifest agreement")) fail(*failure);

  // The folders the manifest no longer names go: each rank removes its own files (the folders
  // may be on each host's own disk), then rank 0 whatever is left. Best effort.
  int keep_old = durable ? 0 : 1;
  {
    MPI_Request request;
    CheckMpi(MPI_Ibcast(&keep_old, 1, MPI_INT, 0, comms.world(), &request), comms.world(), "checkpoint clean-up");
    comms.Wait(&request, "checkpoint clean-up");
  }
  if (keep_old) return;
  std::vector<fs::path> old;
  for (const fs::path& entry : List(root)) {
    const std::string entry_name = entry.filename().string();
    if (IsStepFolderName(entry_name) && entry_name != name && fs::is_directory(entry, ec)) old.push_back(entry);
  }
  std::error_code ignored;
  for (const fs::path& o : old) {
    fs::remove(o / RankFileName(rank), ignored);
    fs::remove(o / (RankFileName(rank) + ".tmp"), ignored);
  }
  agreement.Sync("checkpoint clean-up");
  if (rank == 0) {
    // Only rank files are removed, then the folder if that left it empty: anything else a user
    // put there stays.
    for (const fs::path& o : old) {
      for (const fs::path& entry : List(o)) {
        if (IsRankFileName(entry.filename().string())) fs::remove(entry, ignored);
      }
      fs::remove(o, ignored);
    }
    // Files in the new folder that are not this job's (a stale folder of the same step).
    for (const fs::path& entry : List(folder)) {
      const std::string entry_name = entry.filename().string();
      bool ours = false;
      for (int r = 0; r < ranks && !ours; ++r) ours = entry_name == RankFileName(r);
      if (!ours && IsRankFileName(entry_name)) fs::remove(entry, ignored);
    }
  }
}

namespace {

// Checks the manifest's text against this job; returns the problem ("" when none) and fills
// `step`, `folder` and each rank's expected payload CRC.
std::string CheckManifest(const std::string& text, const std::string& path, const CheckpointSubject& subject, int ranks, int64_t& step,
                          std::string& folder, std::vector<uint64_t>& crcs, std::string& hint) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return path + " is not valid JSON (damaged)";
  if (!j.contains("format")) {
    hint = "train again from the start, or resume it with the shardsim version that wrote it";
    return path + " is a checkpoint of the earlier format (rank files beside the manifest, no checksums), which this version does not resume";
  }
  try {
    if (j.at("format") != kFormatName) return path + " is not a shardsim checkpoint manifest";
    const int64_t version = j.at("version").get<int64_t>();
    if (version != kCheckpointVersion) {
      return path + " is of format version " + std::to_string(version) + "; this shardsim reads version " + std::to_string(kCheckpointVersion);
    }
    step = j.at("step").get<int64_t>();
    folder = j.at("folder").get<std::string>();
    if (folder.empty() || folder.find('/') != std::string::npos || folder == "." || folder == "..") return path + " names no step folder";
    const int64_t saved_ranks = j.at("ranks").get<int64_t>();
    if (saved_ranks != ranks) {
      hint = "checkpoints are sharded by the plan; resume with the plan (and ranks) that wrote it";
      return path + " was written by " + std::to_string(saved_ranks) + " ranks, this job has " + std::to_string(ranks);
    }
    hint = "checkpoints are sharded by the plan; resume with the model and plan that wrote it";
    if (std::string d = DescribeDifferences("model", j.at("model"), ModelIdentity(*subject.model)); !d.empty()) return d;
    if (std::string d = DescribeDifferences("plan", j.at("plan"), PlanToJson(*subject.plan)); !d.empty()) return d;
    hint.clear();
    const json& files = j.at("files");
    if (!files.is_array() || files.size() != static_cast<size_t>(ranks)) {
      return path + " lists " + std::to_string(files.size()) + " rank files, not " + std::to_string(ranks);
    }
    crcs.assign(static_cast<size_t>(ranks), 0);
    for (size_t r = 0; r < files.size(); ++r) {
      if (files[r].at("rank").get<int64_t>() != static_cast<int64_t>(r) || files[r].at("file").get<std::string>() != RankFileName(static_cast<int>(r))) {
        return path + " lists its rank files out of order";
      }
      crcs[r] = files[r].at("payload_crc32").get<uint64_t>();
    }
  } catch (const json::exception& e) {
    return path + " is malformed (" + e.what() + ")";
  }
  return "";
}

// Checks this rank's file `bytes` against the header it should have; returns the problem ("" when
// none). On success the payload starts at `payload_at`.
std::string CheckRankFile(const std::string& bytes, const CheckpointSubject& subject, int rank, int ranks, int64_t step, uint64_t manifest_crc,
                          size_t& payload_at, std::string& hint) {
  if (bytes.size() < kPreambleBytes) return "truncated (" + std::to_string(bytes.size()) + " bytes, shorter than a rank file's preamble)";
  if (std::memcmp(bytes.data(), kCheckpointMagic, sizeof kCheckpointMagic) != 0) return "is not a shardsim checkpoint file";
  const uint32_t version = GetU32(bytes, sizeof kCheckpointMagic);
  if (version != kCheckpointVersion) {
    return "is of format version " + std::to_string(version) + "; this shardsim reads version " + std::to_string(kCheckpointVersion);
  }
  const size_t length = GetU32(bytes, sizeof kCheckpointMagic + 4);
  if (bytes.size() < kPreambleBytes + length + 4) return "truncated inside its header (" + std::to_string(bytes.size()) + " bytes)";
  const std::string text = bytes.substr(kPreambleBytes, length);
  if (GetU32(bytes, kPreambleBytes + length) != Crc32(text.data(), text.size())) return "header checksum mismatch (file damaged)";
  const json header = json::parse(text, nullptr, false);
  if (!header.is_object()) return "has an unreadable header (file damaged)";
  payload_at = kPreambleBytes + length + 4;
  try {
    if (header.at("format") != kFormatName || header.at("version").get<int64_t>() != kCheckpointVersion) return "has a header of another format";
    const int64_t file_rank = header.at("rank").get<int64_t>(), file_ranks = header.at("ranks").get<int64_t>();
    if (file_rank != rank) return "holds rank " + std::to_string(file_rank) + "'s state, not rank " + std::to_string(rank) + "'s";
    if (file_ranks != ranks) return "is from a job of " + std::to_string(file_ranks) + " ranks, this job has " + std::to_string(ranks);
    const int64_t file_step = header.at("step").get<int64_t>();
    if (file_step != step) return "is from step " + std::to_string(file_step) + ", the manifest's checkpoint is of step " + std::to_string(step);
    hint = "checkpoints are sharded by the plan; resume with the model and plan that wrote it";
    if (std::string d = DescribeDifferences("model", header.at("model"), ModelIdentity(*subject.model)); !d.empty()) return d;
    if (std::string d = DescribeDifferences("plan", header.at("plan"), PlanToJson(*subject.plan)); !d.empty()) return d;
    const json& arrays = header.at("arrays");
    if (!arrays.is_array() || arrays.size() != subject.arrays.size()) {
      return "holds " + std::to_string(arrays.size()) + " arrays, " + std::to_string(subject.arrays.size()) + " expected";
    }
    uint64_t expected = 0;
    for (size_t i = 0; i < arrays.size(); ++i) {
      const std::string saved_name = arrays[i].at("name").get<std::string>();
      const uint64_t count = arrays[i].at("count").get<uint64_t>();
      const CheckpointArray& a = subject.arrays[i];
      if (saved_name != a.name) return "array " + std::to_string(i) + " is " + saved_name + ", " + a.name + " expected";
      if (count != a.values->size()) {
        return "sizes differ: " + a.name + " has " + std::to_string(count) + " values in the checkpoint, " + std::to_string(a.values->size()) + " now";
      }
      expected += count * sizeof(float);
    }
    hint.clear();
    if (header.at("payload_bytes").get<uint64_t>() != expected) return "its header's payload size disagrees with its arrays (file damaged)";
    const uint64_t actual = bytes.size() - payload_at;
    if (actual < expected) return "truncated: " + std::to_string(actual) + " of " + std::to_string(expected) + " payload bytes (file damaged)";
    if (actual > expected) return std::to_string(actual - expected) + " bytes of unexpected data after the payload (file damaged)";
    const uint32_t crc = Crc32(bytes.data() + payload_at, expected);
    if (crc != header.at("payload_crc32").get<uint64_t>()) return "checksum mismatch (file damaged)";
    if (crc != manifest_crc) return "checksum differs from the manifest's (a file of another save)";
  } catch (const json::exception& e) {
    return "has a malformed header (" + std::string(e.what()) + ")";
  }
  // Every value finite and within what training can reach.
  size_t at = payload_at;
  for (const CheckpointArray& a : subject.arrays) {
    const size_t n = a.values->size();
    for (size_t i = 0; i < n; ++i) {
      float value;
      std::memcpy(&value, bytes.data() + at + i * sizeof(float), sizeof value);
      if (!std::isfinite(value)) return a.name + " value " + std::to_string(i) + " is " + Number(value) + " (file damaged)";
      if (std::fabs(value) > kMaxCheckpointValue) {
        return a.name + " value " + std::to_string(i) + " is " + Number(value) + ", beyond the " + Number(kMaxCheckpointValue) +
               " a training state can reach (file damaged)";
      }
    }
    at += n * sizeof(float);
  }
  return "";
}

}  // namespace

int64_t LoadCheckpoint(const CheckpointSubject& subject, const std::string& dir, const std::string& flag) {
  MeshComms& comms = *subject.comms;
  Agreement agreement(comms);
  const int rank = comms.rank(), ranks = agreement.size();
  const std::string where = flag + " " + dir;
  const fs::path root(dir);
  const std::string manifest_path = (root / kCheckpointManifest).string();
  auto agree = [&](const Failure& mine, const std::string& what) {
    if (const std::optional<Failure> failure = agreement.Agree(mine, what)) throw InputError(where, failure->what, failure->valid, failure->hint);
  };

  // Rank 0 reads the manifest; every rank checks the same text.
  std::string text;
  Failure mine;
  if (rank == 0) {
    if (const int error = ReadAll(root / kCheckpointManifest, text); error != 0) {
      mine = error == ENOENT ? Failure{"holds no checkpoint (no " + manifest_path + ")", kValid, "give the folder --checkpoint wrote"}
                             : Failure{"cannot read " + manifest_path + ": " + ErrnoText(error), kValid, ""};
    }
  }
  agree(mine, "checkpoint manifest check");
  agreement.Broadcast(text, 0, "checkpoint manifest broadcast");

  int64_t step = -1;
  std::string folder, hint;
  std::vector<uint64_t> crcs;
  if (std::string problem = CheckManifest(text, manifest_path, subject, ranks, step, folder, crcs, hint); !problem.empty()) {
    mine = {problem, kValid, hint};
  }
  // This rank's file.
  std::string bytes;
  size_t payload_at = 0;
  if (mine.what.empty()) {
    const fs::path file = root / folder / RankFileName(rank);
    const std::string prefix = "rank " + std::to_string(rank) + ": " + file.string() + ": ";
    if (const int error = ReadAll(file, bytes); error != 0) {
      mine = {prefix + "cannot be read: " + ErrnoText(error), kValid, kDamagedHint};
    } else if (std::string problem = CheckRankFile(bytes, subject, rank, ranks, step, crcs[static_cast<size_t>(rank)], payload_at, hint);
               !problem.empty()) {
      mine = {prefix + problem, kValid, hint.empty() ? kDamagedHint : hint};
    }
  }
  agree(mine, "checkpoint check");
  // Every rank's file is good: only now does the state change.
  size_t at = payload_at;
  for (const CheckpointArray& a : subject.arrays) {
    std::memcpy(a.values->data(), bytes.data() + at, a.values->size() * sizeof(float));
    at += a.values->size() * sizeof(float);
  }
  return step;
}

void CheckCheckpointFolder(MeshComms& comms, const std::string& dir, const std::string& flag) {
  Agreement agreement(comms);
  const int rank = comms.rank();
  Failure mine;
  const std::string who = "rank " + std::to_string(rank);
  std::error_code ec;
  if (dir.empty()) {
    mine = {"is an empty path", "a folder", ""};
  } else if (fs::create_directories(dir, ec); ec) {
    mine = {who + " cannot create the folder: " + ec.message(), "a folder every rank can create and write", "check the path"};
  } else if (!fs::is_directory(dir, ec)) {
    mine = {"is not a folder", "a folder every rank can create and write", "name a folder"};
  } else {
    const fs::path test = fs::path(dir) / (".shardsim-write-test-" + std::to_string(rank));
    const char byte = 0;
    const int error = WriteDurably(test.string() + ".tmp", test, {{&byte, 1}});
    std::error_code ignored;
    fs::remove(test, ignored);
    if (error != 0) mine = {who + " cannot write in it: " + ErrnoText(error), "a folder every rank can create and write", SpaceHint(error)};
  }
  if (const std::optional<Failure> failure = agreement.Agree(mine, "checkpoint folder check")) {
    throw InputError(flag + " " + dir, failure->what, failure->valid, failure->hint);
  }
}

void CheckResumeFolder(MeshComms& comms, const std::string& dir, const std::string& flag) {
  Agreement agreement(comms);
  const int rank = comms.rank();
  Failure mine;
  std::error_code ec;
  const std::string on = " (on rank " + std::to_string(rank) + ")";
  if (dir.empty()) {
    mine = {"is an empty path", "a folder --checkpoint wrote", ""};
  } else if (!fs::exists(dir, ec)) {
    mine = {"does not exist" + on, "a folder --checkpoint wrote", "check the path"};
  } else if (!fs::is_directory(dir, ec)) {
    mine = {"is not a folder" + on, "a folder --checkpoint wrote", "check the path"};
  } else if (rank == 0 && !fs::is_regular_file(fs::path(dir) / kCheckpointManifest, ec)) {
    mine = {"holds no checkpoint (no " + (fs::path(dir) / kCheckpointManifest).string() + ")", "a folder --checkpoint wrote",
            "a save that failed leaves the previous checkpoint; a folder never saved to has none"};
  } else if (rank == 0 && ::access((fs::path(dir) / kCheckpointManifest).c_str(), R_OK) != 0) {
    mine = {"cannot read " + (fs::path(dir) / kCheckpointManifest).string() + ": " + ErrnoText(errno), "a folder --checkpoint wrote", ""};
  }
  if (const std::optional<Failure> failure = agreement.Agree(mine, "resume folder check")) {
    throw InputError(flag + " " + dir, failure->what, failure->valid, failure->hint);
  }
}

}  // namespace shardsim::runtime
