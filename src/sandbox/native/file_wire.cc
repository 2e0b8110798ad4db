#include "sandbox/native/file_wire.h"

#include "sandbox/native/wire.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::native {

std::string encode(const FileRequest& r) {
  WireWriter w;
  w.u32(static_cast<std::uint32_t>(r.op));
  w.str(r.path);
  w.u64(r.offset);
  w.u64(r.length);
  w.u32(r.mode);
  w.u32(r.flags);
  w.str(r.skip);
  w.str(r.to);
  return w.bytes();
}

namespace {

// An absolute path the worker may be asked about: bounded, no NUL.
bool valid_request_path(const std::string& p) {
  return !p.empty() && p.front() == '/' && p.size() <= kMaxFilePath &&
         p.find('\0') == std::string::npos;
}

}  // namespace

std::optional<FileRequest> decode_file_request(std::string_view bytes) {
  WireReader rd(bytes);
  FileRequest r;
  const std::uint32_t op = rd.u32();
  r.path = rd.str();
  r.offset = rd.u64();
  r.length = rd.u64();
  r.mode = rd.u32();
  r.flags = rd.u32();
  r.skip = rd.str();
  r.to = rd.str();
  if (!rd.ok() || !rd.at_end() || op < 1 || op > 8) return std::nullopt;
  if (!valid_request_path(r.path) || (r.mode & ~07777u) != 0) return std::nullopt;
  // Only a rename names a second path, and then it is checked as the first.
  const bool rename = op == static_cast<std::uint32_t>(FileOp::kRename);
  if (rename ? !valid_request_path(r.to) : !r.to.empty()) return std::nullopt;
  r.op = static_cast<FileOp>(op);
  return r;
}

std::string encode(const FileReply& r) {
  WireWriter w;
  w.u32(static_cast<std::uint32_t>(r.status));
  w.i32(r.err);
  w.str(r.step);
  w.u64(r.size);
  w.u64(r.count);
  w.u32(r.truncated ? 1 : 0);
  w.u32(r.watching ? 1 : 0);
  return w.bytes();
}

std::optional<FileReply> decode_file_reply(std::string_view bytes) {
  WireReader rd(bytes);
  FileReply r;
  const std::uint32_t status = rd.u32();
  r.err = rd.i32();
  r.step = rd.str();
  r.size = rd.u64();
  r.count = rd.u64();
  const std::uint32_t truncated = rd.u32();
  const std::uint32_t watching = rd.u32();
  if (!rd.ok() || !rd.at_end() || status > 3 || truncated > 1 || watching > 1 || r.err < 0)
    return std::nullopt;
  r.status = static_cast<FileStatus>(status);
  r.truncated = truncated == 1;
  r.watching = watching == 1;
  return r;
}

std::string encode(const FileEntryWire& e) {
  WireWriter w;
  w.str(e.name);
  w.u32(e.type);
  w.u64(e.size);
  w.u32(e.mode);
  w.u64(static_cast<std::uint64_t>(e.mtime_sec));
  w.u64(static_cast<std::uint64_t>(e.mtime_nsec));
  return w.bytes();
}

std::optional<FileEntryWire> decode_file_entry(std::string_view bytes) {
  WireReader rd(bytes);
  FileEntryWire e;
  e.name = rd.str();
  e.type = rd.u32();
  e.size = rd.u64();
  e.mode = rd.u32();
  e.mtime_sec = static_cast<std::int64_t>(rd.u64());
  e.mtime_nsec = static_cast<std::int64_t>(rd.u64());
  if (!rd.ok() || !rd.at_end()) return std::nullopt;
  if (!valid_listed_name(e.name)) return std::nullopt;  // at most kMaxFilePath bytes too
  if (e.type > 3 || (e.mode & ~07777u) != 0 || e.mtime_nsec < 0 || e.mtime_nsec >= 1'000'000'000)
    return std::nullopt;
  return e;
}

std::string frame(std::string_view message) {
  WireWriter w;
  w.str(message);
  return w.bytes();
}

}  // namespace sandcastle::sandbox::native
