#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace shardsim {
namespace {

[[noreturn]] void Fail(const std::string& flag, const std::string& path, int error) {
  const std::string reason = std::strerror(error);
  const std::string hint = error == ENOSPC || error == EDQUOT ? "free some space or write elsewhere"
                                                            : "check that the folder exists and is writable";
  throw InputError(flag + " " + path, "cannot be written: " + reason, "", hint);
}


// Names of streams already open (/dev/stdout, /dev/fd/3, /proc/self/fd/1) are written in place
// and appended to even when they lead to a regular file: a file renamed over would be cut off
// from the stream, and truncating it would lose what the stream already wrote there.
bool IsStreamName(const std::string& path) { return path.starts_with("/dev/") || path.starts_with("/proc/"); }

std::string FolderOf(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

int WriteFully(int fd, const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

void CheckOutputWritable(const std::string& path, const std::string& flag) {
  if (path.empty()) throw InputError(flag, "is an empty path", "a file path");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw InputError(flag + " " + path, "is a folder", "a file path", "name a file inside it");
    if (!S_ISREG(st.st_mode) || IsStreamName(path)) {
      if (::access(path.c_str(), W_OK) != 0) Fail(flag, path, errno);
      return;
    }
  }
  const std::string folder = FolderOf(path);
  struct stat folder_st {};
  if (::stat(folder.c_str(), &folder_st) != 0) Fail(flag, path, errno);
  if (!S_ISDIR(folder_st.st_mode)) Fail(flag, path, ENOTDIR);
  if (::access(folder.c_str(), W_OK) != 0) Fail(flag, path, errno);
}

void WriteOutputFile(const std::string& path, const std::string& text, const std::string& flag) {
  if (path.empty()) throw InputError(flag, "is an empty path", "a file path");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw InputError(flag + " " + path, "is a folder", "a file path", "name a file inside it");
  if (::stat(path.c_str(), &st) == 0 && (!S_ISREG(st.st_mode) || IsStreamName(path))) {
    // A device or pipe: renaming over it would replace it, so write in place.
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) Fail(flag, path, errno);
    const int error = WriteFully(fd, text.data(), text.size());
    if (::close(fd) != 0 && error == 0) Fail(flag, path, errno);
    if (error != 0) Fail(flag, path, error);
    return;
  }
  // A link is followed, so the file it names is replaced and the link stays a link.
  std::string target = path;
  struct stat link {};
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    std::error_code ec;
    const std::filesystem::path resolved = std::filesystem::canonical(path, ec);
    if (!ec) target = resolved.string();
  }
  // An existing file keeps its permissions; a new one gets the usual rw-r--r--.
  struct stat existing {};
  const mode_t mode = ::stat(target.c_str(), &existing) == 0 ? (existing.st_mode & 07777) : 0644;
  std::string temporary = target + ".XXXXXX";
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) Fail(flag, path, errno);
  int error = WriteFully(fd, text.data(), text.size());
  if (error == 0 && ::fchmod(fd, mode) != 0) error = errno;
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && std::rename(temporary.c_str(), target.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temporary.c_str());
    Fail(flag, path, error);
  }
}

}  // namespace shardsim
