// A checkpoint's files, below the protocol of checkpoint.h: the rank file's format (magic,
// version, header JSON with its CRC-32, float32 payload), the names of step folders and rank
// files, and durable writes and whole reads that return errno instead of throwing, so that every
// rank can report its own failure to the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardsim::runtime {

inline constexpr char kCheckpointMagic[8] = {'S', 'H', 'S', 'I', 'M', 'C', 'K', 'P'};
inline constexpr uint32_t kCheckpointVersion = 2;
// Magic, version, header length: what precedes the header JSON.
inline constexpr size_t kPreambleBytes = sizeof kCheckpointMagic + 2 * sizeof(uint32_t);

// CRC-32 (Boost.CRC crc_32_type) of `size` bytes.
uint32_t Crc32(const void* data, size_t size);
// The preamble and header of a rank file (everything before the payload).
std::string EncodeHead(const nlohmann::json& header);
// The little-endian u32 at `at` of `in`.
uint32_t GetU32(const std::string& in, size_t at);
// A rank file's bytes: magic, version, `header` (its payload_bytes and payload_crc32 set from
// `payload` here), the header's CRC, then `payload`. For tools and tests that write one by hand.
std::string EncodeRankFile(nlohmann::json header, const std::string& payload);
// A rank file split into its header JSON and payload, with no checks but the framing; throws
// InputError when the framing cannot be read.
struct RawRankFile {
  nlohmann::json header;
  std::string payload;
};
RawRankFile DecodeRankFile(const std::string& bytes, const std::string& where);

// The step folder's name for `step` ("step-000120").
std::string StepFolderName(int64_t step);
// Only the names StepFolderName makes (and their "-1" twin): a user's own "step-by-step/" is not ours.
bool IsStepFolderName(const std::string& name);
// "rank-R.bin".
std::string RankFileName(int rank);
// A rank file or its temporary, of any rank.
bool IsRankFileName(const std::string& name);

// One stretch of bytes of a file being written.
struct Piece {
  const void* data;
  size_t size;
};
// fsync of a folder (what makes a rename in it durable); 0 or errno.
int SyncFolder(const std::filesystem::path& folder);
// Writes `pieces` to `temp`, fsyncs it, renames it to `target` and fsyncs the folder. Returns 0
// or the errno of the failing step; `temp` is removed on failure.
int WriteDurably(const std::filesystem::path& temp, const std::filesystem::path& target, const std::vector<Piece>& pieces);
// The entries of `folder` (none when it cannot be read; never throws).
std::vector<std::filesystem::path> List(const std::filesystem::path& folder);
// Reads all of `path`; returns 0 or errno.
int ReadAll(const std::filesystem::path& path, std::string& out);

}  // namespace shardsim::runtime
