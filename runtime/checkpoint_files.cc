#include "runtime/checkpoint_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/crc.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <regex>

#include "core/error.h"
#include "core/output_file.h"

namespace shardsim::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void PutU32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

}  // namespace

uint32_t GetU32(const std::string& in, size_t at) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(static_cast<unsigned char>(in[at + static_cast<size_t>(i)])) << (8 * i);
  return value;
}

// The preamble and header of a rank file (everything before the payload).
std::string EncodeHead(const json& header) {
  const std::string text = header.dump();
  std::string out(kCheckpointMagic, sizeof kCheckpointMagic);
  PutU32(out, kCheckpointVersion);
  PutU32(out, static_cast<uint32_t>(text.size()));
  out += text;
  PutU32(out, Crc32(text.data(), text.size()));
  return out;
}

// fsync of a folder (what makes a rename in it durable); 0 or errno.
int SyncFolder(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  int error = ::fsync(fd) != 0 ? errno : 0;
  // Some file systems cannot sync a folder; a rename on them is as durable as it gets.
  if (error == EINVAL || error == EROFS) error = 0;
  ::close(fd);
  return error;
}

// Writes `pieces` to `temp`, fsyncs it, renames it to `target` and fsyncs the folder. Returns 0
// or the errno of the failing step; `temp` is removed on failure.
int WriteDurably(const fs::path& temp, const fs::path& target, const std::vector<Piece>& pieces) {
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int error = 0;
  for (const Piece& piece : pieces) {
    if (error == 0) error = WriteFully(fd, piece.data, piece.size);
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && std::rename(temp.c_str(), target.c_str()) != 0) error = errno;
  if (error == 0) error = SyncFolder(target.parent_path());
  if (error != 0) ::unlink(temp.c_str());
  return error;
}

std::string RankFileName(int rank) { return "rank-" + std::to_string(rank) + ".bin"; }

// Only the names StepFolderName makes (and their "-1" twin): a user's own "step-by-step/" is not ours.
bool IsStepFolderName(const std::string& name) {
  static const std::regex ours(R"(step-\d{6,}(-1)?)");
  return std::regex_match(name, ours);
}

// A rank file or its temporary, of any rank.
bool IsRankFileName(const std::string& name) {
  static const std::regex ours(R"(rank-\d+\.bin(\.tmp)?)");
  return std::regex_match(name, ours);
}

// The entries of `folder` (none when it cannot be read; never throws).
std::vector<fs::path> List(const fs::path& folder) {
  std::vector<fs::path> entries;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(it->path());
  return entries;
}

// Reads all of `path`; returns 0 or errno.
int ReadAll(const fs::path& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return error;
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return EISDIR;
  }
  out.clear();
  out.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return error;
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return 0;
}

uint32_t Crc32(const void* data, size_t size) {
  boost::crc_32_type crc;
  crc.process_bytes(data, size);
  return crc.checksum();
}

std::string StepFolderName(int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
  return name;
}

std::string EncodeRankFile(json header, const std::string& payload) {
  header["payload_bytes"] = payload.size();
  header["payload_crc32"] = Crc32(payload.data(), payload.size());
  return EncodeHead(header) + payload;
}

RawRankFile DecodeRankFile(const std::string& bytes, const std::string& where) {
  if (bytes.size() < kPreambleBytes || std::memcmp(bytes.data(), kCheckpointMagic, sizeof kCheckpointMagic) != 0) {
    throw InputError(where, "is not a shardsim checkpoint file");
  }
  const size_t length = GetU32(bytes, sizeof kCheckpointMagic + 4);
  if (bytes.size() < kPreambleBytes + length + 4) throw InputError(where, "is truncated inside its header");
  RawRankFile raw;
  raw.header = json::parse(bytes.substr(kPreambleBytes, length), nullptr, false);
  if (raw.header.is_discarded()) throw InputError(where, "has an unreadable header");
  raw.payload = bytes.substr(kPreambleBytes + length + 4);
  return raw;
}

}  // namespace shardsim::runtime
