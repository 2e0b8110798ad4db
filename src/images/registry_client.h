// The client side of the OCI distribution API, as `sandcastle image pull`
// uses it: image references, the /v2/ ping, bearer-token (and basic) auth,
// manifests and blobs (redirects followed with the Authorization header kept
// to the registry itself).
//
// Reference rules (Docker's): [registry[:port]/]repository[:tag][@sha256:hex].
// The first path component is a registry when it contains '.' or ':' or is
// "localhost"; otherwise the registry is Docker Hub (docker.io, reached at
// registry-1.docker.io) and a one-component repository gets "library/" in
// front. No tag and no digest means ":latest". Repositories are lower case.
//
// Transport: HTTPS with the certificate verified against the system's CAs
// (plus --ca-file). Plain HTTP only for registries named by
// --insecure-registry HOST:PORT, and for loopback addresses, where HTTPS is
// tried first and HTTP used only if the server does not speak TLS at all
// (a certificate that fails verification is an error, never a downgrade).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "images/registry_http.h"

namespace sandcastle::images {

struct ImageReference {
  std::string registry;    // "docker.io", "127.0.0.1:5000", "ghcr.io"
  std::string repository;  // "library/debian", "test/img"
  std::string tag;         // empty when pulled by digest only
  std::string digest;      // "sha256:<hex>" or empty

  // Host and port the API is reached at ("registry-1.docker.io" for docker.io).
  std::string endpoint() const;
  // "registry/repository:tag", "registry/repository@digest" (both when both given).
  std::string str() const;
};

// kInvalidArgument with the rule broken when `ref` is not a valid reference.
Result<ImageReference> parse_reference(std::string_view ref);

struct Platform {
  std::string os = "linux";
  std::string architecture = "amd64";
  std::string variant;  // empty: any
  std::string str() const {
    return os + "/" + architecture + (variant.empty() ? "" : "/" + variant);
  }
};
// "os/arch[/variant]", e.g. "linux/arm64/v8".
Result<Platform> parse_platform(std::string_view text);

struct RegistryOptions {
  std::vector<std::string> insecure_registries;  // "host:port" spoken to over plain HTTP
  std::string ca_file;
  std::string username;  // with password: basic auth at the token server (or the registry)
  std::string password;
  std::chrono::milliseconds connect_timeout{15'000};
  std::chrono::milliseconds read_timeout{60'000};
  std::size_t max_manifest_bytes = 4u << 20;
};

// A manifest or index as served: the exact bytes (their digest is the
// manifest's identity) and the media type they declare.
struct FetchedManifest {
  std::string media_type;
  std::string digest;  // sha256 of body, checked against the reference when pulled by digest
  std::string body;
};

class RegistryClient {
 public:
  RegistryClient(ImageReference ref, RegistryOptions opts);
  ~RegistryClient();

  // GET /v2/: picks the scheme (see above) and learns the auth challenge.
  Status ping();

  // GET /v2/<repo>/manifests/<tag or digest>, with the media types we take in
  // Accept. A digest reference's bytes must hash to it.
  Result<FetchedManifest> get_manifest(const std::string& tag_or_digest);

  // GET /v2/<repo>/blobs/<digest>, body streamed to `sink`, following up to 5
  // redirects (Authorization only to the registry's own host:port).
  Status get_blob(const std::string& digest, const http::BodySink& sink);

  const ImageReference& reference() const { return ref_; }

 private:
  Result<http::Response> request(const std::string& path,
                                 const std::vector<std::pair<std::string, std::string>>& extra,
                                 std::size_t body_limit, const http::BodySink& sink);
  Status authenticate(const std::string& challenge);
  std::string describe_denial(const http::Response& r) const;
  bool plain_http_allowed(const std::string& authority, const std::string& host) const;
  bool plain_http_listed(const std::string& name, const std::string& authority) const;

  ImageReference ref_;
  RegistryOptions opts_;
  http::Client http_;
  bool tls_ = true;
  bool pinged_ = false;
  std::string authorization_;  // "Bearer ..." or "Basic ..." once known
  std::string last_challenge_;
};

}  // namespace sandcastle::images
