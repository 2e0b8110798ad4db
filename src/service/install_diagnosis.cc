#include "service/install_diagnosis.h"

#include <initializer_list>
#include <vector>

namespace sandcastle::service {

namespace {

std::string_view tail_of(std::string_view s) {
  return s.size() <= kDiagnosisScanBytes ? s : s.substr(s.size() - kDiagnosisScanBytes);
}

// The scanned text: both streams' tails (pip and npm split their messages
// between them differently).
struct Scan {
  std::string_view streams[2];

  // The first line (in stderr, then stdout) that contains any of `needles`.
  std::string_view line_with(std::initializer_list<std::string_view> needles) const {
    for (std::string_view s : streams) {
      for (std::string_view n : needles) {
        auto at = s.find(n);
        if (at == std::string_view::npos) continue;
        auto start = s.rfind('\n', at);
        start = start == std::string_view::npos ? 0 : start + 1;
        auto end = s.find('\n', at);
        return s.substr(start, end == std::string_view::npos ? s.size() - start : end - start);
      }
    }
    return {};
  }
  bool has(std::initializer_list<std::string_view> needles) const {
    return !line_with(needles).empty();
  }

  // The last `n` non-empty lines of stderr (stdout when stderr is empty).
  std::string last_lines(std::size_t n) const {
    std::string_view s =
        streams[0].find_first_not_of(" \t\r\n") != std::string_view::npos ? streams[0] : streams[1];
    std::vector<std::string_view> lines;
    while (!s.empty() && lines.size() < n) {
      auto nl = s.find_last_not_of(" \t\r\n");
      if (nl == std::string_view::npos) break;
      s = s.substr(0, nl + 1);
      auto start = s.rfind('\n');
      std::string_view line = start == std::string_view::npos ? s : s.substr(start + 1);
      lines.push_back(line);
      s = start == std::string_view::npos ? std::string_view() : s.substr(0, start);
    }
    std::string out;
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
      out += (out.empty() ? "" : " | ") + one_line(*it, 200);
    return out;
  }
};

// The text between `open` and the next `close` after it, within `line`.
std::string_view between(std::string_view line, std::string_view open, std::string_view close) {
  auto a = line.find(open);
  if (a == std::string_view::npos) return {};
  a += open.size();
  auto b = line.find(close, a);
  return line.substr(a, b == std::string_view::npos ? line.size() - a : b - a);
}

// npm prefixes its messages "npm error " (npm ≥ 10) or "npm ERR! " (older).
std::string_view npm_message(std::string_view line) {
  for (std::string_view p : {"npm error ", "npm ERR! "}) {
    auto at = line.find(p);
    if (at != std::string_view::npos) return line.substr(at + p.size());
  }
  return line;
}

InstallDiagnosis make(const char* cause, std::string summary) {
  return {cause, std::move(summary)};
}

}  // namespace

std::string one_line(std::string_view s, std::size_t max) {
  const bool cut = s.size() > max;
  std::string out;
  for (char c : s.substr(0, max)) {
    auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f ? ' ' : c);
  }
  // Never end inside a UTF-8 sequence.
  if (cut) {
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
  }
  out.erase(0, out.find_first_not_of(' '));
  out.erase(out.find_last_not_of(' ') + 1);
  return cut ? out + "…" : out;
}

std::string redact_url(std::string_view url) {
  auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  auto auth_end = url.find_first_of("/?#", scheme + 3);
  auto at = url.substr(0, auth_end).rfind('@');
  if (at == std::string_view::npos || at < scheme) return std::string(url);
  return std::string(url.substr(0, scheme + 3)) + "***" + std::string(url.substr(at));
}

InstallDiagnosis diagnose_install(const InstallOutcome& o) {
  const Scan scan{{tail_of(o.stderr_data), tail_of(o.stdout_data)}};
  const bool pip = o.manager == "pip";
  const std::string index = redact_url(o.index);
  const char* ca_vars = pip ? "SSL_CERT_FILE or PIP_CERT" : "SSL_CERT_FILE or NODE_EXTRA_CA_CERTS";

  // The connection-level failures come first: pip reports each of them as
  // "from versions: none" too, which would otherwise read as a missing package.
  if (auto line = scan.line_with({"CERTIFICATE_VERIFY_FAILED", "SELF_SIGNED_CERT_IN_CHAIN",
                                  "DEPTH_ZERO_SELF_SIGNED_CERT", "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
                                  "UNABLE_TO_GET_ISSUER_CERT", "CERT_HAS_EXPIRED",
                                  "ERR_TLS_CERT_ALTNAME_INVALID", "CERT_UNTRUSTED",
                                  "unable to get local issuer certificate",
                                  "self-signed certificate", "self signed certificate"});
      !line.empty()) {
    std::string_view why = between(line, "certificate verify failed: ", ")");
    why = why.substr(0, why.find(" (_ssl"));  // OpenSSL's source line is noise here
    if (why.empty()) why = between(line, "code ", " ");
    if (why.empty()) why = npm_message(line);
    return make(
        "tls_verification_failed",
        "TLS verification failed: the installer does not trust the certificate of " + index + " (" +
            one_line(why, 120) + "); " +
            (o.host_ca_given
                 ? std::string("the CA files named by the server's SSL_CERT_FILE/PIP_CERT/"
                               "NODE_EXTRA_CA_CERTS/REQUESTS_CA_BUNDLE do not cover it")
                 : std::string("if this host intercepts TLS or the index uses a private CA, start "
                               "sandcastle with ") +
                       ca_vars + " naming the CA's PEM file"));
  }
  if (!o.denied_host.empty() || scan.has({"Tunnel connection failed: 403", "statusCode=403"})) {
    std::string host = o.denied_host.empty() ? std::string("a host") : std::string(o.denied_host);
    return make("blocked_by_policy", "blocked by the egress policy: the installer tried to reach " +
                                         host + ", which is not a configured package index (only " +
                                         index +
                                         " is reachable; set --pip-index-url / --npm-registry to a "
                                         "mirror that serves everything)");
  }
  if (auto line = scan.line_with({"Tunnel connection failed",
                                  "NewConnectionError",
                                  "Failed to establish a new connection",
                                  "ProxyError",
                                  "ConnectTimeoutError",
                                  "Read timed out",
                                  "ReadTimeoutError",
                                  "Temporary failure in name resolution",
                                  "Name or service not known",
                                  "ECONNREFUSED",
                                  "ENOTFOUND",
                                  "ETIMEDOUT",
                                  "EAI_AGAIN",
                                  "ECONNRESET",
                                  "ENETUNREACH",
                                  "EHOSTUNREACH",
                                  "code E502",
                                  "code E503",
                                  "code E504",
                                  "tunneling socket could not be established",
                                  "socket hang up"});
      !line.empty()) {
    std::string_view why = between(line, "Tunnel connection failed: ", "'");
    if (why.empty()) why = between(line, "Failed to establish a new connection: ", "'");
    if (why.empty()) why = pip ? line : npm_message(line);
    if (!o.proxy_failure.empty())
      why = o.proxy_failure;  // the server knows better than the installer
    return make("index_unreachable",
                "index unreachable: " + index + " could not be reached from this host (" +
                    one_line(why, 160) +
                    "); check the index URL and the server's network and proxy settings "
                    "(HTTPS_PROXY, NO_PROXY)");
  }
  if (auto line = scan.line_with({"SSLError", "ERR_SSL_", "SSL routines"}); !line.empty()) {
    std::string_view why = between(line, "SSLError(1, '", "'");
    if (why.empty()) why = pip ? line : npm_message(line);
    return make("tls_error", "TLS handshake with " + index + " failed (" + one_line(why, 160) +
                                 "); does the index speak https at that address?");
  }
  if (scan.has({"No space left on device", "ENOSPC", "[Errno 28]"}))
    return make("disk_full",
                "disk full: the sandbox's /workspace is out of space (limits.disk_mb); create the "
                "sandbox with "
                "a larger disk limit or install fewer packages");
  if (auto line = scan.line_with({"THESE PACKAGES DO NOT MATCH THE HASHES", "EINTEGRITY"});
      !line.empty())
    return make("integrity_mismatch",
                "integrity check failed: a downloaded file does not match the index's "
                "checksum (" +
                    one_line(pip ? line : npm_message(line), 160) + ")");
  if (auto line = scan.line_with({"ResolutionImpossible", "conflicting dependencies", "ERESOLVE"});
      !line.empty()) {
    std::string_view detail =
        pip ? scan.line_with({"Cannot install"}) : scan.line_with({"Could not resolve dependency"});
    if (detail.empty()) detail = pip ? line : npm_message(line);
    return make("dependency_conflict",
                "dependency conflict: " + one_line(pip ? detail : npm_message(detail), 200) +
                    "; loosen the version constraints");
  }
  if (auto line = scan.line_with({"Failed building wheel for", "Failed to build ",
                                  "Could not build wheels for", "metadata-generation-failed",
                                  "subprocess-exited-with-error", "legacy-install-failure",
                                  "gyp ERR!", "command failed", "ELIFECYCLE"});
      !line.empty()) {
    std::string_view what = pip ? scan.line_with({"Failed building wheel for", "Failed to build ",
                                                  "Could not build wheels for"})
                                : scan.line_with({"npm error command sh", "npm ERR! command sh"});
    if (what.empty()) what = line;
    return make("build_failed",
                "build failure: " + one_line(pip ? what : npm_message(what), 200) +
                    " (a package that compiles from source needs its build tools and headers in "
                    "the sandbox image; prefer a version with a prebuilt wheel/binary)");
  }
  if (pip) {
    if (auto line = scan.line_with({"Could not find a version that satisfies the requirement "});
        !line.empty()) {
      std::string_view req = between(line, "the requirement ", " (from versions: ");
      std::string_view versions = between(line, "(from versions: ", ")");
      std::string py = one_line(scan.line_with({"require a different python version"}), 200);
      if (versions == "none" || versions.empty())
        return make("package_not_found",
                    "package not found: " + one_line(req, 120) + " is not on the index " + index +
                        (py.empty() ? "" : " (" + py + ")") + "; check the name's spelling");
      return make("no_matching_version", "no matching version: " + one_line(req, 120) +
                                             "; the index has " + one_line(versions, 200) +
                                             (py.empty() ? "" : " (" + py + ")"));
    }
    if (auto line = scan.line_with({"No matching distribution found for "}); !line.empty())
      return make("package_not_found",
                  "package not found: " +
                      one_line(between(line, "No matching distribution found for ", "\n"), 120) +
                      " is not on the index " + index);
  } else {
    if (auto line = scan.line_with({"code ETARGET", "No matching version found for "});
        !line.empty()) {
      std::string_view spec =
          between(scan.line_with({"No matching version found for "}), "found for ", "\n");
      if (!spec.empty() && spec.back() == '.') spec.remove_suffix(1);
      return make("no_matching_version",
                  "no matching version: " + one_line(spec.empty() ? npm_message(line) : spec, 160) +
                      " is not published on " + index);
    }
    if (auto line = scan.line_with({"code E404", "404 Not Found"}); !line.empty()) {
      std::string_view name =
          between(scan.line_with({"The requested resource '"}), "resource '", "'");
      return make("package_not_found",
                  "package not found: " +
                      (name.empty() ? one_line(npm_message(scan.line_with({"404 Not Found"})), 160)
                                    : one_line(name, 120) + " is not on the registry " + index) +
                      "; check the name's spelling");
    }
  }
  std::string last = scan.last_lines(3);
  return make("installer_failed",
              "installer exited " + std::to_string(o.exit_status) +
                  (last.empty() ? "; it printed nothing" : "; last lines: " + last));
}

}  // namespace sandcastle::service
