// Fuzzes what `image pull` reads from the command line and from registry
// headers before any request: image references, platforms, URLs and
// Location headers. Whatever parses must print back to itself (so the name
// an image is stored under names the same image again), and a repository,
// tag or digest that parses never holds a byte a path or header could
// misread.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "images/oci_layout_writer.h"
#include "images/registry_client.h"

namespace {

using namespace sandcastle::images;

void check(bool ok) {
  if (!ok) std::abort();
}

bool plain(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f ||
        c == '%' || c == '?' || c == '#' || c == '\\')
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);

  if (auto r = parse_reference(in); r.ok()) {
    check(!r->registry.empty() && !r->repository.empty());
    check(!r->tag.empty() || !r->digest.empty());
    check(r->digest.empty() || is_sha256_digest(r->digest));
    check(plain(r->repository) && plain(r->tag) && plain(r->registry));
    check(r->repository.find("..") == std::string::npos && r->repository.front() != '/' &&
          r->repository.back() != '/');
    auto again = parse_reference(r->str());
    check(again.ok());
    check(again->registry == r->registry && again->repository == r->repository &&
          again->tag == r->tag && again->digest == r->digest);
  }

  if (auto p = parse_platform(in); p.ok()) {
    auto again = parse_platform(p->str());
    check(again.ok() && again->str() == p->str());
  }

  if (auto u = http::parse_url(in); u.ok()) {
    check(!u->host.empty() && !u->port.empty() && !u->target.empty() && u->target[0] == '/');
    for (char c : u->target) check(static_cast<unsigned char>(c) > 0x20 && c != 0x7f);
    auto again = http::parse_url(u->str());
    check(again.ok());
    check(again->tls == u->tls && again->host == u->host && again->port == u->port &&
          again->target == u->target);
  }

  static const http::Url base = *http::parse_url("http://127.0.0.1:5000/v2/a/blobs/x");
  if (auto u = http::resolve_url(base, in); u.ok()) {
    check(!u->host.empty() && u->target[0] == '/');
    for (char c : u->target) check(static_cast<unsigned char>(c) > 0x20 && c != 0x7f);
  }
  return 0;
}
