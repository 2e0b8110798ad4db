// Sandbox file data held by the server, bounded: a read up to
// kUnreservedBytes needs no reservation (one at a time per sandbox: the
// engine serializes a sandbox's file calls), and anything larger reserves its
// footprint from the server-wide transfer budget first (ToolConfig), waiting
// a little for it. The size comes from a first, small read, so nothing is
// reserved (or held) for what a sandbox only claims.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/byte_budget.h"
#include "common/result.h"
#include "sandbox/sandbox.h"

namespace sandcastle::service {

inline constexpr std::uint64_t kUnreservedBytes = std::uint64_t{1024} * 1024;
inline constexpr std::chrono::milliseconds kBudgetWait{10'000};
// How many times its size a file's bytes are held at the peak: an MCP reply
// holds the bytes, their base64, the structured result, its text mirror and
// the serialized message; a file link the bytes and the response body.
inline constexpr std::uint64_t kMcpReplyCopies = 8;
inline constexpr std::uint64_t kLinkCopies = 3;

struct BoundedRead {
  sandbox::FileData file;   // file.too_large: a whole read above `cap`
  ByteBudget::Lease lease;  // to be held while the data (or copies of it) are
};

// `length` empty: the whole rest of the file, refused (too_large) above cap.
// The lease is for `copies` times the bytes read.
Result<BoundedRead> read_bounded(sandbox::Sandbox& sb, ByteBudget& budget, const std::string& path,
                                 std::uint64_t offset, std::optional<std::uint64_t> length, std::uint64_t cap,
                                 std::uint64_t copies);

// A lease for `copies` times `data_bytes` about to be held (none when the
// data is at most kUnreservedBytes).
Result<ByteBudget::Lease> reserve_transfer(ByteBudget& budget, std::uint64_t data_bytes, std::uint64_t copies = 1);

}  // namespace sandcastle::service
