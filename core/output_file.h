// Writing what a command produces (--write-*, --trace, --report, --plot, --out, checkpoints'
// manifests): one way, so that a failing write never clobbers an existing file and is always
// reported. A regular file (or a new path) is written to a temporary file in the same folder,
// synced, and renamed over the target only when complete; a special file or an open stream's name
// (/dev/stdout, a pipe, /dev/full) is written in place, appended to, and every write is checked.
#pragma once

#include <cstddef>
#include <string>

namespace shardsim {

// Writes `text` to `path`. Throws InputError naming `flag` and `path` ("--trace out.json:
// cannot be written: No space left on device") when any step fails; the temporary file is then
// removed and an existing `path` is left as it was.
void WriteOutputFile(const std::string& path, const std::string& text, const std::string& flag);

// Writes all of [data, data + size) to `fd`, resuming after interruptions; returns 0 or the errno
// of the failing write (for callers that must report rather than throw, as checkpoint ranks do).
int WriteFully(int fd, const void* data, size_t size);

// Throws InputError naming `flag` and `path` when `path` could not be written later (its folder
// is missing or not writable, or it is a folder), without creating or changing anything. For
// checking an output before a long computation.
void CheckOutputWritable(const std::string& path, const std::string& flag);

}  // namespace shardsim
