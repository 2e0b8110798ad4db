// save_sandbox's in-sandbox half (issue 15): a worker forked by the
// sandbox's init that turns what the sandbox changed into one OCI layer tar
// and streams it to the server.
//
// The control-plane rule (file_wire.h) holds: the server never opens the
// overlay's upper dir (which holds the sandbox's /workspace too: it is a
// directory of the overlay). Init keeps an O_PATH fd of the tmpfs holding
// it (rw/, opened before pivot_root, when that path still existed); the
// worker it forks for a save drops to the sandbox's context (sandbox uid,
// no capabilities, no_new_privs, its seccomp filter, not dumpable) and
// walks the upper dir beneath that fd with openat2 (RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV) and O_NOFOLLOW: a symlink is
// written as a link, never followed. A sandbox on image "host" has no
// overlay: its /workspace (the worker's own view) is the layer.
//
// The layer: regular files, directories, symlinks, hardlinks within the
// layer (ustar, with pax records for long names and sizes); overlay
// whiteouts (0:0 character devices, or files marked user.overlay.whiteout)
// become `.wh.NAME`, opaque directories (user.overlay.opaque=y) get
// `.wh..wh..opq`; fifos, sockets, devices and files the sandbox user cannot
// read are skipped and counted. Owners are written as 0:0 (the store owns
// every layer file; a sandbox maps one id).
//
// The stream (SOCK_STREAM): chunks of u32 length + bytes of tar, a zero
// length, then one framed LayerSummaryWire. The server bounds the total by
// max_bytes and the entries by max_entries; the worker stops early, with
// an error naming the file, when either would be passed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

// What the server sends with ControlKind::kSaveLayer (one fd: the stream).
struct LayerExportWire {
  std::uint64_t max_bytes = 0;    // tar bytes
  std::uint64_t max_entries = 0;  // tar entries
};
std::string encode(const LayerExportWire& w);
std::optional<LayerExportWire> decode_layer_export(std::string_view bytes);

struct LayerSummaryWire {
  std::int32_t err = 0;  // 0: the tar before it is complete
  std::string message;   // err != 0: what failed ("file /x is 9 GiB: ...")
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;
  std::uint64_t skipped = 0;               // fifos, sockets, devices
  std::uint64_t unreadable = 0;            // files/dirs the sandbox user cannot open
  std::vector<std::string> skipped_paths;  // the first few of both
  bool whole_root = false;  // an overlay upper dir was included (not just /workspace)
};
std::string encode(const LayerSummaryWire& s);
std::optional<LayerSummaryWire> decode_layer_summary(std::string_view bytes);

// The largest summary message accepted (a few paths).
constexpr std::uint32_t kMaxLayerSummary = 64 * 1024;
// A chunk of tar on the stream is at most this long.
constexpr std::uint32_t kMaxLayerChunk = 1024 * 1024;

// In the worker init forked (init's other fds closed): enters the sandbox's
// context, streams the layer on `sock`, exits. rw_fd: init's kept rw/ fd,
// -1 for a sandbox on image "host".
[[noreturn]] void run_layer_export(int sock, int rw_fd, const InitConfig& config,
                                   const LayerExportWire& w);

}  // namespace sandcastle::sandbox::native
