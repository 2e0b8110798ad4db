// The console's files as the build embedded them (src/web/embed_main.cc
// writes the table from web/ and web/node_modules at build time): each one
// gzip-compressed, with its content type and a content hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace sandcastle::web {

struct EmbeddedAsset {
  std::string_view name;          // "app.js", "index.html", "xterm.mjs"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  const unsigned char* gzip;      // the bytes, gzip-compressed (RFC 1952)
  size_t gzip_size;
  size_t size;            // uncompressed
  std::string_view hash;  // SHA-256 of the uncompressed bytes, 16 hex digits
  bool served;            // false: offered only through code (run_result.html)
};

std::span<const EmbeddedAsset> embedded_assets();

// A hash over every served asset but index.html: the path segment of
// /assets/<version>/<name>, so an asset's URL changes whenever any asset
// does and each URL can be cached for good.
std::string_view asset_version();

}  // namespace sandcastle::web
