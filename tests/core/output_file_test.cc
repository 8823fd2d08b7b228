#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace shardsim {
namespace {

namespace fs = std::filesystem;

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shardsim_output_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string PathOf(const std::string& name) const { return (dir_ / name).string(); }
  static std::string Read(const std::string& path) {
    std::ostringstream text;
    text << std::ifstream(path).rdbuf();
    return text.str();
  }
  // Files in the folder: a failed write must leave no temporary file behind.
  size_t Entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator())); }

  fs::path dir_;
};

TEST_F(OutputFileTest, WritesNewAndReplacesExistingFiles) {
  const std::string path = PathOf("out.json");
  WriteOutputFile(path, "first\n", "--out");
  EXPECT_EQ(Read(path), "first\n");
  WriteOutputFile(path, "second\n", "--out");
  EXPECT_EQ(Read(path), "second\n");
  EXPECT_EQ(Entries(), 1u);
}

TEST_F(OutputFileTest, MissingFolderFailsNamingFlagAndPath) {
  const std::string path = PathOf("no/such/out.json");
  try {
    WriteOutputFile(path, "x", "--write-plan");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--write-plan " + path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot be written"), std::string::npos) << e.what();
  }
  EXPECT_THROW(CheckOutputWritable(path, "--write-plan"), InputError);
  EXPECT_EQ(Entries(), 0u);
}

TEST_F(OutputFileTest, FolderIsNotAFile) {
  EXPECT_THROW(WriteOutputFile(dir_.string(), "x", "--plot"), InputError);
  EXPECT_THROW(CheckOutputWritable(dir_.string(), "--plot"), InputError);
  EXPECT_THROW(CheckOutputWritable("", "--plot"), InputError);
}

TEST_F(OutputFileTest, CheckCreatesNothing) {
  const std::string path = PathOf("later.json");
  CheckOutputWritable(path, "--out");
  EXPECT_FALSE(fs::exists(path));
  std::ofstream(PathOf("kept.json")) << "kept";
  CheckOutputWritable(PathOf("kept.json"), "--out");
  EXPECT_EQ(Read(PathOf("kept.json")), "kept");
}

// A link stays a link to the replaced file, and an existing file keeps its permissions.
TEST_F(OutputFileTest, KeepsLinksAndPermissions) {
  const std::string target = PathOf("target.json"), link = PathOf("link.json");
  std::ofstream(target) << "old";
  fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write);
  fs::create_symlink(target, link);
  WriteOutputFile(link, "new", "--out");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(Read(target), "new");
  EXPECT_EQ(fs::status(target).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(Entries(), 2u);
}

// /dev/fd/N (as /dev/stdout) names an open stream: its file is appended to, never replaced.
TEST_F(OutputFileTest, StreamNamesAreAppendedTo) {
  const std::string path = PathOf("stream.txt");
  std::ofstream(path) << "before\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  struct stat before {}, after {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  WriteOutputFile("/dev/fd/" + std::to_string(fd), "after\n", "--trace");
  ::close(fd);
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(Read(path), "before\nafter\n");
}

// A device is written in place and every write is checked: /dev/full reports "no space" and stays
// the device it was (a rename over it would have replaced it with a regular file).
TEST_F(OutputFileTest, FullDeviceFailsAndStaysADevice) {
  struct stat st {};
  if (::stat("/dev/full", &st) != 0) GTEST_SKIP() << "no /dev/full";
  try {
    WriteOutputFile("/dev/full", std::string(1 << 16, 'x'), "--write-model");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--write-model /dev/full: cannot be written: No space left on device"), std::string::npos) << e.what();
  }
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  CheckOutputWritable("/dev/full", "--out");  // writable as far as anyone can tell beforehand
  WriteOutputFile("/dev/null", "x", "--out");
}

}  // namespace
}  // namespace shardsim
