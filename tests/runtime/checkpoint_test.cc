// Checkpoints are complete or absent and never resumed when damaged (runtime/checkpoint.h): run
// under mpiexec with 2 ranks (any count works; the damaged or failing rank is the last one).
//   - a save writes a step folder and a manifest naming it, the files' headers say what they
//     hold, older step folders go, and resuming is bit-identical to training straight through;
//   - a save that one rank cannot write (a folder where its temporary file goes; a full tmpfs)
//     ends promptly on every rank with the same one-line error naming the rank and the file, leaves
//     no file of its own, and the previous checkpoint still resumes bit-identically;
//   - damaged checkpoints (a bit flip, truncation, appended bytes, 1e30 or NaN behind correct
//     checksums, a damaged header, another rank's file, a missing file, an edited or old-format
//     manifest) and another model of the same parameter count are refused on every rank with the
//     same message naming the rank, the file and what differs, changing nothing on disk or in
//     the trainer.
#include <mpi.h>
#include <sys/mount.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_json.h"
#include "core/model_presets.h"
#include "core/plan_json.h"
#include "runtime/checkpoint.h"
#include "runtime/trainer.h"
#include "tests/runtime/test_models.h"

namespace shardsim::runtime {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int Rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void Sync() { MPI_Barrier(MPI_COMM_WORLD); }

using equivalence::TestModel;
using equivalence::WorldSize;

// Pipeline and data parallel with ZeRO-1 where the world allows (sharded optimizer state).
PlanSpec TestPlan() {
  PlanSpec p;
  if (WorldSize() % 2 == 0) {
    p.mesh.data = WorldSize() / 2;
    p.mesh.pipeline = 2;
  } else {
    p.mesh.pipeline = WorldSize();
  }
  p.global_batch_size = 8;
  p.seq_len = 32;
  p.zero_stage = 1;
  return p;
}

TrainOptions Options() {
  TrainOptions options;
  options.timeout_s = 60;  // a failed save must end far sooner
  return options;
}

const Corpus& TestCorpus() {
  static const Corpus corpus(std::string(ShippedCorpus()), 32);
  return corpus;
}

// The losses of 6 steps straight through.
const std::vector<double>& Straight() {
  static const std::vector<double> losses = [] {
    Trainer t(TestModel(), TestPlan(), Options(), MPI_COMM_WORLD, TestCorpus());
    std::vector<double> l;
    for (int step = 0; step < 6; ++step) l.push_back(t.Step().loss);
    return l;
  }();
  return losses;
}

// A new folder under /tmp, the same on every rank.
std::string SharedTempDir(const std::string& stem) {
  std::string dir = "/tmp/shardsim-" + stem + "-XXXXXX";
  int ok = 1;
  if (Rank() == 0) ok = mkdtemp(dir.data()) != nullptr;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Bcast(dir.data(), static_cast<int>(dir.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  return ok ? dir : "";
}

void RemoveOnRankZero(const std::string& dir) {
  Sync();
  std::error_code ignored;
  if (Rank() == 0 && !dir.empty()) fs::remove_all(dir, ignored);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream all;
  all << in.rdbuf();
  return all.str();
}

void WriteFile(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }

// Every file and folder under `dir` with its bytes ("<folder>" for folders), on rank 0.
std::map<std::string, std::string> Snapshot(const fs::path& dir) {
  std::map<std::string, std::string> all;
  if (Rank() != 0) return all;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    all[fs::relative(e.path(), dir).string()] = e.is_directory() ? "<folder>" : ReadFile(e.path());
  }
  return all;
}

std::vector<std::string> Names(const std::map<std::string, std::string>& snapshot) {
  std::vector<std::string> names;
  for (const auto& [name, bytes] : snapshot) names.push_back(name);
  return names;
}

// The checkpoint of step `step` as it should be laid out: the manifest and a file per rank.
std::vector<std::string> Layout(int64_t step) {
  std::vector<std::string> names = {kCheckpointManifest, StepFolderName(step)};
  for (int r = 0; r < WorldSize(); ++r) names.push_back(StepFolderName(step) + "/rank-" + std::to_string(r) + ".bin");
  std::sort(names.begin(), names.end());
  return names;
}

// What `action` throws as InputError on this rank: its message, "" when it throws nothing.
std::string Thrown(const std::function<void()>& action) {
  try {
    action();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an InputError: ") + e.what();
  }
  return "";
}

// True on every rank when every rank holds rank 0's `text`.
bool SameOnAllRanks(const std::string& text) {
  int64_t length = static_cast<int64_t>(text.size());
  MPI_Bcast(&length, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  std::string first(static_cast<size_t>(length), '\0');
  if (Rank() == 0) first = text;
  MPI_Bcast(first.data(), static_cast<int>(length), MPI_CHAR, 0, MPI_COMM_WORLD);
  int same = first == text ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return same == 1;
}

// Trains 3 steps and saves them into `dir` (step-000003).
void SaveAtStepThree(const std::string& dir) {
  Trainer t(TestModel(), TestPlan(), Options(), MPI_COMM_WORLD, TestCorpus());
  for (int step = 0; step < 3; ++step) t.Step();
  t.SaveCheckpoint(dir);
}

// Resumes `dir` and expects step `step` and the straight-through losses after it.
void ExpectResumesBitIdentically(const std::string& dir, int64_t step) {
  Trainer resumed(TestModel(), TestPlan(), Options(), MPI_COMM_WORLD, TestCorpus());
  ASSERT_EQ(Thrown([&] { resumed.LoadCheckpoint(dir); }), "");
  EXPECT_EQ(resumed.steps_done(), step);
  for (int64_t s = step; s < 6; ++s) EXPECT_EQ(resumed.Step().loss, Straight()[static_cast<size_t>(s)]) << "step " << s;
}

TEST(CheckpointTest, SaveWritesAStepFolderAManifestAndHeadersAndResumesBitIdentically) {
  const std::vector<double>& straight = Straight();
  const std::string dir = SharedTempDir("ckpt-layout");
  ASSERT_FALSE(dir.empty());
  {
    Trainer t(TestModel(), TestPlan(), Options(), MPI_COMM_WORLD, TestCorpus());
    for (int step = 0; step < 2; ++step) EXPECT_EQ(t.Step().loss, straight[static_cast<size_t>(step)]);
    t.SaveCheckpoint(dir);
    EXPECT_EQ(t.Step().loss, straight[2]);
    t.SaveCheckpoint(dir);  // replaces step 2's
  }
  Sync();
  if (Rank() == 0) {
    EXPECT_EQ(Names(Snapshot(dir)), Layout(3));  // step-000002 is gone, no temporary file is left
    const json manifest = json::parse(ReadFile(fs::path(dir) / kCheckpointManifest));
    EXPECT_EQ(manifest.at("format"), "shardsim-checkpoint");
    EXPECT_EQ(manifest.at("version"), kCheckpointVersion);
    EXPECT_EQ(manifest.at("step"), 3);
    EXPECT_EQ(manifest.at("folder"), "step-000003");
    EXPECT_EQ(manifest.at("ranks"), WorldSize());
    EXPECT_EQ(manifest.at("model"), ModelToJson(TestModel()));
    EXPECT_EQ(manifest.at("plan"), PlanToJson(TestPlan()));
    ASSERT_EQ(manifest.at("files").size(), static_cast<size_t>(WorldSize()));
    for (int r = 0; r < WorldSize(); ++r) {
      const json& entry = manifest.at("files")[static_cast<size_t>(r)];
      const std::string bytes = ReadFile(fs::path(dir) / "step-000003" / entry.at("file").get<std::string>());
      EXPECT_EQ(entry.at("bytes").get<uint64_t>(), bytes.size());
      const RawRankFile raw = DecodeRankFile(bytes, "rank file");
      EXPECT_EQ(raw.header.at("rank"), r);
      EXPECT_EQ(raw.header.at("ranks"), WorldSize());
      EXPECT_EQ(raw.header.at("step"), 3);
      EXPECT_EQ(raw.header.at("model"), ModelToJson(TestModel()));
      EXPECT_EQ(raw.header.at("plan"), PlanToJson(TestPlan()));
      ASSERT_EQ(raw.header.at("arrays").size(), 3u);
      EXPECT_EQ(raw.header.at("arrays")[0].at("name"), "params");
      EXPECT_EQ(raw.header.at("arrays")[1].at("name"), "adam_m");
      EXPECT_EQ(raw.header.at("arrays")[2].at("name"), "adam_v");
      EXPECT_EQ(raw.header.at("payload_bytes").get<uint64_t>(), raw.payload.size());
      EXPECT_EQ(raw.header.at("payload_crc32").get<uint64_t>(), Crc32(raw.payload.data(), raw.payload.size()));
      EXPECT_EQ(entry.at("payload_crc32"), raw.header.at("payload_crc32"));
    }
  }
  ExpectResumesBitIdentically(dir, 3);
  RemoveOnRankZero(dir);
}

// One rank cannot write its file (a folder stands where its temporary file goes): every rank
// throws the same one-line error, promptly; the save leaves nothing; step 3's checkpoint resumes.
TEST(CheckpointTest, ARankThatCannotWriteFailsTheSaveOnEveryRankAndKeepsThePreviousCheckpoint) {
  const std::string dir = SharedTempDir("ckpt-blocked");
  ASSERT_FALSE(dir.empty());
  const int last = WorldSize() - 1;
  const std::string file = dir + "/step-000006/rank-" + std::to_string(last) + ".bin";
  Trainer t(TestModel(), TestPlan(), Options(), MPI_COMM_WORLD, TestCorpus());
  for (int step = 0; step < 3; ++step) t.Step();
  t.SaveCheckpoint(dir);
  for (int step = 3; step < 6; ++step) t.Step();
  if (Rank() == 0) {
    fs::create_directories(file + ".tmp");
    WriteFile(file + ".tmp/keep", "x");  // not removable as an empty folder
  }
  Sync();
  const std::string manifest = Rank() == 0 ? ReadFile(fs::path(dir) / kCheckpointManifest) : "";
  const auto start = std::chrono::steady_clock::now();
  const std::string message = Thrown([&] { t.SaveCheckpoint(dir); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(message, "--checkpoint " + dir + ": rank " + std::to_string(last) + " cannot write " + file +
                         ": Is a directory; the checkpoint of step 3 is kept (hint: check that the folder exists and is writable)");
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_TRUE(SameOnAllRanks(message)) << message;
  EXPECT_LT(seconds, 10.0) << "the save should fail at once, not after the " << Options().timeout_s << " s timeout";
  if (Rank() == 0) std::printf("a save that rank %d cannot write failed on every rank after %.0f ms\n", last, 1e3 * seconds);
  Sync();
  if (Rank() == 0) {
    EXPECT_EQ(Names(Snapshot(dir)), Layout(3));  // the failed save's folder and files are gone
    EXPECT_EQ(ReadFile(fs::path(dir) / kCheckpointManifest), manifest);
  }
  ExpectResumesBitIdentically(dir, 3);
  // The next save, once the obstacle is gone, succeeds and replaces step 3's.
  t.SaveCheckpoint(dir);
  Sync();
  if (Rank() == 0) {
    EXPECT_EQ(Names(Snapshot(dir)), Layout(6));
  }
  RemoveOnRankZero(dir);
}

// The disk fills during a save: a tmpfs that holds one checkpoint but not two.
TEST(CheckpointTest, ADiskFullSaveFailsOnEveryRankAndKeepsThePreviousCheckpoint) {
  // One checkpoint's size, measured.
  const std::string scratch = SharedTempDir("ckpt-size");
  ASSERT_FALSE(scratch.empty());
  SaveAtStepThree(scratch);
  Sync();
  uint64_t bytes = 0;
  if (Rank() == 0) {
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(scratch)) {
      if (e.is_regular_file()) bytes += (e.file_size() + 4095) / 4096 * 4096;
    }
  }
  RemoveOnRankZero(scratch);
  const std::string dir = SharedTempDir("ckpt-full");
  ASSERT_FALSE(dir.empty());
  int mounted = 1;
  std::string why;
  if (Rank() == 0) {
    const std::string size = "size=" + std::to_string(bytes * 3 / 2 + 16 * 4096);
    mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, size.c_str()) == 0;
    if (!mounted) why = std::strerror(errno);
  }
  MPI_Bcast(&mounted, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!mounted) {
    RemoveOnRankZero(dir);
    GTEST_SKIP() << "cannot mount a tmpfs here (" << why << "; needs root or CAP_SYS_ADMIN)";
  }
  // Unmounted and removed however the test ends.
  struct Unmount {
    std::string dir;
    ~Unmount() {
      Sync();
      if (Rank() == 0) {
        ::umount2(dir.c_str(), MNT_DETACH);
        std::error_code ignored;
        fs::remove_all(dir, ignored);
      }
    }
  } unmount{dir};
  const std::string ck = dir + "/ck";
  {
    Trainer t(TestModel(), TestPlan(), Options(), MPI_COMM_WORLD, TestCorpus());
    for (int step = 0; step < 3; ++step) t.Step();
    ASSERT_EQ(Thrown([&] { t.SaveCheckpoint(ck); }), "");
    for (int step = 3; step < 6; ++step) t.Step();
    Sync();
    const std::string manifest = Rank() == 0 ? ReadFile(fs::path(ck) / kCheckpointManifest) : "";
    const auto start = std::chrono::steady_clock::now();
    const std::string message = Thrown([&] { t.SaveCheckpoint(ck); });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(message.find("--checkpoint " + ck + ": rank "), std::string::npos) << message;
    EXPECT_NE(message.find(" cannot write " + ck + "/step-000006/rank-"), std::string::npos) << message;
    EXPECT_NE(message.find(".bin: No space left on device; the checkpoint of step 3 is kept"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
    EXPECT_TRUE(SameOnAllRanks(message)) << message;
    EXPECT_LT(seconds, 10.0);
    if (Rank() == 0) std::printf("a save into a full tmpfs failed on every rank after %.0f ms\n", 1e3 * seconds);
    Sync();
    if (Rank() == 0) {
      EXPECT_EQ(Names(Snapshot(ck)), Layout(3));
      EXPECT_EQ(ReadFile(fs::path(ck) / kCheckpointManifest), manifest);
    }
    ExpectResumesBitIdentically(ck, 3);
  }
}

// One way to damage a checkpoint (on rank 0, in the folder given) and what the refusal must say.
struct Damage {
  std::string name;
  std::function<void(const fs::path& dir)> apply;
  std::string expected;  // a part of the message; "{file}" is the damaged rank file's path, "{dir}" the folder
};

fs::path RankFile(const fs::path& dir, int rank) { return dir / "step-000003" / ("rank-" + std::to_string(rank) + ".bin"); }

int Last() { return WorldSize() - 1; }

void EditManifest(const fs::path& dir, const std::function<void(json&)>& edit) {
  json manifest = json::parse(ReadFile(dir / kCheckpointManifest));
  edit(manifest);
  WriteFile(dir / kCheckpointManifest, manifest.dump(2));
}

// Sets float `index` of the last rank's payload to `value` and rewrites both checksums (the
// file's and the manifest's), so only the value check can catch it.
void ForgeValue(const fs::path& dir, size_t index, float value) {
  const fs::path file = RankFile(dir, Last());
  RawRankFile raw = DecodeRankFile(ReadFile(file), file.string());
  std::memcpy(raw.payload.data() + index * sizeof(float), &value, sizeof value);
  const std::string bytes = EncodeRankFile(raw.header, raw.payload);
  WriteFile(file, bytes);
  const uint32_t crc = Crc32(raw.payload.data(), raw.payload.size());
  EditManifest(dir, [&](json& m) {
    m["files"][static_cast<size_t>(Last())]["payload_crc32"] = crc;
    m["files"][static_cast<size_t>(Last())]["bytes"] = bytes.size();
  });
}

std::vector<Damage> Damages() {
  std::vector<Damage> d = {
      {"payload bit flip",
       [](const fs::path& dir) {
         std::string bytes = ReadFile(RankFile(dir, Last()));
         bytes[bytes.size() - 1001] ^= 0x10;
         WriteFile(RankFile(dir, Last()), bytes);
       },
       "rank {last}: {file}: checksum mismatch (file damaged)"},
      {"truncated",
       [](const fs::path& dir) {
         const std::string bytes = ReadFile(RankFile(dir, Last()));
         WriteFile(RankFile(dir, Last()), bytes.substr(0, bytes.size() - 100));
       },
       "rank {last}: {file}: truncated: "},
      {"garbage appended", [](const fs::path& dir) { WriteFile(RankFile(dir, Last()), ReadFile(RankFile(dir, Last())) + "garbage"); },
       "rank {last}: {file}: 7 bytes of unexpected data after the payload (file damaged)"},
      {"1e30 behind correct checksums", [](const fs::path& dir) { ForgeValue(dir, 5, 1e30f); },
       "rank {last}: {file}: params value 5 is 1e+30, beyond the 1e+15 a training state can reach (file damaged)"},
      {"NaN behind correct checksums", [](const fs::path& dir) { ForgeValue(dir, 7, std::nanf("")); },
       "rank {last}: {file}: params value 7 is nan (file damaged)"},
      {"header byte flip",
       [](const fs::path& dir) {
         std::string bytes = ReadFile(RankFile(dir, Last()));
         bytes[30] ^= 0x01;
         WriteFile(RankFile(dir, Last()), bytes);
       },
       "rank {last}: {file}: header checksum mismatch (file damaged)"},
      {"not a checkpoint file", [](const fs::path& dir) { WriteFile(RankFile(dir, Last()), "hello, world; not a checkpoint"); },
       "rank {last}: {file}: is not a shardsim checkpoint file"},
      {"missing rank file", [](const fs::path& dir) { fs::remove(RankFile(dir, Last())); },
       "rank {last}: {file}: cannot be read: No such file or directory"},
      {"manifest names another ranks count", [](const fs::path& dir) { EditManifest(dir, [](json& m) { m["ranks"] = WorldSize() + 1; }); },
       "{dir}/checkpoint.json was written by {ranks+1} ranks, this job has {ranks}"},
      {"manifest names another model", [](const fs::path& dir) { EditManifest(dir, [](json& m) { m["model"]["num_heads"] = 8; }); },
       "model differs: num_heads 8 in the checkpoint, 4 now"},
      {"manifest names another plan", [](const fs::path& dir) { EditManifest(dir, [](json& m) { m["plan"]["global_batch_size"] = 16; }); },
       "plan differs: global_batch_size 16 in the checkpoint, 8 now"},
      {"manifest is not JSON", [](const fs::path& dir) { WriteFile(dir / kCheckpointManifest, "{\"format\": "); },
       "{dir}/checkpoint.json is not valid JSON (damaged)"},
      {"manifest of the earlier format",
       [](const fs::path& dir) { WriteFile(dir / kCheckpointManifest, json{{"step", 3}, {"ranks", WorldSize()}, {"model", "mpi-test"}}.dump()); },
       "{dir}/checkpoint.json is a checkpoint of the earlier format"},
      {"no manifest", [](const fs::path& dir) { fs::remove(dir / kCheckpointManifest); }, "holds no checkpoint (no {dir}/checkpoint.json)"},
  };
  if (WorldSize() > 1) {
    d.push_back({"another rank's file",
                 [](const fs::path& dir) { fs::copy_file(RankFile(dir, 0), RankFile(dir, Last()), fs::copy_options::overwrite_existing); },
                 "rank {last}: {file}: holds rank 0's state, not rank {last}'s"});
  }
  return d;
}

std::string Expand(std::string text, const std::string& dir) {
  auto replace = [&](const std::string& key, const std::string& value) {
    for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), value);
  };
  replace("{file}", RankFile(dir, Last()).string());
  replace("{dir}", dir);
  replace("{last}", std::to_string(Last()));
  replace("{ranks+1}", std::to_string(WorldSize() + 1));
  replace("{ranks}", std::to_string(WorldSize()));
  return text;
}

TEST(CheckpointTest, DamagedCheckpointsAreRefusedOnEveryRankNamingTheRankAndFileAndChangeNothing) {
  const std::string pristine = SharedTempDir("ckpt-pristine");
  ASSERT_FALSE(pristine.empty());
  SaveAtStepThree(pristine);
  // One trainer for every case: a refused resume must leave it as it was.
  Trainer t(TestModel(), TestPlan(), Options(), MPI_COMM_WORLD, TestCorpus());
  const std::vector<float> params = t.model().params();
  for (const Damage& damage : Damages()) {
    SCOPED_TRACE(damage.name);
    const std::string dir = SharedTempDir("ckpt-damaged");
    ASSERT_FALSE(dir.empty());
    if (Rank() == 0) {
      fs::copy(pristine, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
      damage.apply(dir);
    }
    Sync();
    const std::map<std::string, std::string> before = Snapshot(dir);
    const std::string message = Thrown([&] { t.LoadCheckpoint(dir); });
    EXPECT_NE(message.find("--resume " + dir + ": "), std::string::npos) << message;
    EXPECT_NE(message.find(Expand(damage.expected, dir)), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
    EXPECT_TRUE(SameOnAllRanks(message)) << message;
    EXPECT_EQ(t.steps_done(), 0);
    EXPECT_TRUE(t.model().params() == params) << "a refused resume changed the parameters";
    Sync();
    if (Rank() == 0) {
      EXPECT_TRUE(Snapshot(dir) == before) << "a refused resume changed the checkpoint";
    }
    RemoveOnRankZero(dir);
  }
  // The pristine copy still resumes.
  ExpectResumesBitIdentically(pristine, 3);
  RemoveOnRankZero(pristine);
}

// Another head shape with the same parameter count (8 heads of 8 over 4 K/V heads instead of 4
// of 16 over 2): the old identity (name, layers x hidden, plan, value count) let it through.
TEST(CheckpointTest, AnotherHeadShapeOfTheSameParameterCountIsRefused) {
  const std::string dir = SharedTempDir("ckpt-heads");
  ASSERT_FALSE(dir.empty());
  SaveAtStepThree(dir);
  ModelSpec other = TestModel();
  other.num_heads = 8;
  other.num_kv_heads = 4;
  other.head_dim = 8;
  Trainer t(other, TestPlan(), Options(), MPI_COMM_WORLD, TestCorpus());
  Trainer same(TestModel(), TestPlan(), Options(), MPI_COMM_WORLD, TestCorpus());
  ASSERT_EQ(t.model().params().size(), same.model().params().size()) << "the shapes should have the same parameter count";
  const std::vector<float> params = t.model().params();
  const std::map<std::string, std::string> before = Snapshot(dir);
  const std::string message = Thrown([&] { t.LoadCheckpoint(dir); });
  EXPECT_EQ(message, "--resume " + dir +
                         ": model differs: head_dim 16 in the checkpoint, 8 now; num_heads 4 in the checkpoint, 8 now; num_kv_heads 2 in the "
                         "checkpoint, 4 now; valid: a complete checkpoint of the same model and plan (hint: checkpoints are sharded by the plan; "
                         "resume with the model and plan that wrote it)");
  EXPECT_TRUE(SameOnAllRanks(message));
  EXPECT_EQ(t.steps_done(), 0);
  EXPECT_TRUE(t.model().params() == params);
  Sync();
  if (Rank() == 0) {
    EXPECT_TRUE(Snapshot(dir) == before);
  }
  RemoveOnRankZero(dir);
}

// The folder checks made before training: a path under a file cannot be created, a missing
// folder or one without a manifest cannot be resumed; the same message on every rank.
TEST(CheckpointTest, FolderChecksBeforeTrainingAgreeAcrossRanks) {
  const std::string dir = SharedTempDir("ckpt-folders");
  ASSERT_FALSE(dir.empty());
  if (Rank() == 0) WriteFile(fs::path(dir) / "file", "x");
  Sync();
  Trainer t(TestModel(), TestPlan(), Options(), MPI_COMM_WORLD, TestCorpus());
  const std::string under_file = dir + "/file/ck";
  std::string message = Thrown([&] { CheckCheckpointFolder(t.comms(), under_file); });
  EXPECT_EQ(message, "--checkpoint " + under_file +
                         ": rank 0 cannot create the folder: Not a directory; valid: a folder every rank can create and write (hint: check the path)");
  EXPECT_TRUE(SameOnAllRanks(message));
  EXPECT_EQ(Thrown([&] { CheckCheckpointFolder(t.comms(), dir + "/new/ck"); }), "");
  Sync();
  if (Rank() == 0) {
    EXPECT_TRUE(fs::is_directory(dir + "/new/ck"));
    EXPECT_TRUE(fs::is_empty(dir + "/new/ck")) << "the test file must be removed";
  }
  message = Thrown([&] { CheckResumeFolder(t.comms(), dir + "/missing"); });
  EXPECT_NE(message.find("--resume " + dir + "/missing: does not exist"), std::string::npos) << message;
  EXPECT_TRUE(SameOnAllRanks(message));
  message = Thrown([&] { CheckResumeFolder(t.comms(), dir + "/new/ck"); });
  EXPECT_NE(message.find("holds no checkpoint (no " + dir + "/new/ck/checkpoint.json)"), std::string::npos) << message;
  EXPECT_TRUE(SameOnAllRanks(message));
  RemoveOnRankZero(dir);
}

// What saving and resuming tiny-dense (the preset, fp32) costs: printed, and the restored state
// equals the saved one bit for bit.
TEST(CheckpointTest, TinyDenseSaveAndResumeCost) {
  const ModelSpec model = FindModelPreset("tiny-dense")->spec;
  PlanSpec plan;
  plan.mesh.data = WorldSize();
  plan.global_batch_size = 2 * WorldSize();
  plan.seq_len = 64;
  const Corpus corpus(std::string(ShippedCorpus()), plan.seq_len);
  const std::string dir = SharedTempDir("ckpt-tiny-dense");
  ASSERT_FALSE(dir.empty());
  Trainer t(model, plan, Options(), MPI_COMM_WORLD, corpus);
  t.Step();
  Sync();
  auto start = std::chrono::steady_clock::now();
  t.SaveCheckpoint(dir);
  const double save_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  TrainOptions other = Options();
  other.seed = 99;
  Trainer resumed(model, plan, other, MPI_COMM_WORLD, corpus);
  Sync();
  start = std::chrono::steady_clock::now();
  resumed.LoadCheckpoint(dir);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(resumed.model().params() == t.model().params());
  EXPECT_EQ(resumed.Step().loss, t.Step().loss);
  Sync();
  if (Rank() == 0) {
    const uintmax_t bytes = fs::file_size(fs::path(dir) / "step-000001" / "rank-0.bin");
    std::printf("tiny-dense checkpoint, %d ranks, %.1f MB per rank file: save %.0f ms, resume %.0f ms\n", WorldSize(), bytes / 1e6, 1e3 * save_s,
                1e3 * load_s);
  }
  RemoveOnRankZero(dir);
}

}  // namespace
}  // namespace shardsim::runtime
