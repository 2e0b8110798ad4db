// Where a Docker-compatible engine listens: a unix socket, plain TCP, or TCP
// with TLS client certificates (a directory holding ca.pem, cert.pem and
// key.pem, as docker's --tlsverify uses them).
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace sandcastle::sandbox::engine {

struct Endpoint {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string path;  // kUnix: absolute socket path
  std::string host;  // kTcp: name or address (IPv6 without brackets)
  std::string port;  // kTcp: decimal, 1..65535
  bool tls = false;  // kTcp only
  std::string tls_dir;

  // "unix:///run/x.sock" or "tcp://host:port": how errors name the engine.
  std::string str() const;
};

// Parses "unix:///abs/path.sock" or "tcp://host[:port]" (port defaults to
// 2376 with TLS, 2375 without, as docker's). A non-empty `tls_dir` turns on
// TLS and is only valid for tcp://. Refuses anything else with
// kInvalidArgument naming the problem.
Result<Endpoint> parse_endpoint(std::string_view url, std::string_view tls_dir = {});

}  // namespace sandcastle::sandbox::engine
