// The one-line cause of a failed install (service/install_diagnosis.h), from
// pip's and npm's real output (captured from pip 23 and npm 11 on this
// machine), and what it does with hostile output: bounded, single-line,
// printable.
#include "service/install_diagnosis.h"

#include <gtest/gtest.h>

#include <string>

namespace sandcastle::service {
namespace {

InstallDiagnosis pip(const std::string& err, const std::string& out = "",
                     std::string_view denied = "", bool ca = false) {
  return diagnose_install({"pip", 1, out, err, "https://pypi.example/simple/", denied, ca, ""});
}

InstallDiagnosis npm(const std::string& err) {
  return diagnose_install({"npm", 1, "", err, "https://registry.example/", "", false, ""});
}

TEST(InstallDiagnosisTest, PipPackageNotFoundAndNoMatchingVersion) {
  auto d =
      pip("ERROR: Could not find a version that satisfies the requirement nosuch_pkg (from "
          "versions: none)\n"
          "ERROR: No matching distribution found for nosuch_pkg\n");
  EXPECT_EQ(d.cause, "package_not_found");
  EXPECT_EQ(d.summary,
            "package not found: nosuch_pkg is not on the index https://pypi.example/simple/; check "
            "the name's spelling");
  d =
      pip("ERROR: Could not find a version that satisfies the requirement demo==9.9 (from "
          "versions: 1.2.3, 1.3)\n"
          "ERROR: No matching distribution found for demo==9.9\n");
  EXPECT_EQ(d.cause, "no_matching_version");
  EXPECT_EQ(d.summary, "no matching version: demo==9.9; the index has 1.2.3, 1.3");
}

TEST(InstallDiagnosisTest, PipConnectionFailuresAreNotAMissingPackage) {
  const std::string tail =
      "ERROR: Could not find a version that satisfies the requirement demo (from versions: none)\n"
      "ERROR: No matching distribution found for demo\n";
  auto d =
      pip("WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) "
          "after connection broken "
          "by 'SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate "
          "verify failed: "
          "self-signed certificate in certificate chain (_ssl.c:992)'))': /simple/demo/\n" +
          tail);
  EXPECT_EQ(d.cause, "tls_verification_failed");
  EXPECT_EQ(d.summary.rfind(
                "TLS verification failed: the installer does not trust the certificate of "
                "https://pypi.example/simple/ (self-signed certificate in certificate chain); ",
                0),
            0u)
      << d.summary;
  EXPECT_NE(d.summary.find("start sandcastle with SSL_CERT_FILE or PIP_CERT"), std::string::npos)
      << d.summary;
  EXPECT_NE(
      pip(std::string("CERTIFICATE_VERIFY_FAILED\n"), "", "", true).summary.find("do not cover it"),
      std::string::npos);

  d =
      pip("WARNING: Retrying (Retry(total=0)) after connection broken by 'ProxyError('Cannot "
          "connect to proxy.', "
          "OSError('Tunnel connection failed: 502 Bad Gateway'))': /simple/demo/\n" +
          tail);
  EXPECT_EQ(d.cause, "index_unreachable");
  EXPECT_EQ(
      d.summary,
      "index unreachable: https://pypi.example/simple/ could not be reached from this host (502 "
      "Bad Gateway); "
      "check the index URL and the server's network and proxy settings (HTTPS_PROXY, NO_PROXY)");

  // The egress proxy's own reason beats the installer's "502".
  d = diagnose_install(
      {"npm", 1, "", "npm error code E502\nnpm error 502 Bad Gateway - GET https://r/x\n",
       "https://r/", "", false, "cannot connect to the host's proxy 10.0.0.1:3128"});
  EXPECT_EQ(d.summary,
            "index unreachable: https://r/ could not be reached from this host (cannot connect to "
            "the host's "
            "proxy 10.0.0.1:3128); check the index URL and the server's network and proxy settings "
            "(HTTPS_PROXY, NO_PROXY)");

  d = pip(
      "WARNING: Retrying (Retry(total=0)) after connection broken by 'SSLError(SSLError(1, '[SSL: "
      "WRONG_VERSION_NUMBER] wrong version number (_ssl.c:992)'))': /simple/demo/\n" +
      tail);
  EXPECT_EQ(d.cause, "tls_error");
  EXPECT_EQ(
      d.summary.rfind(
          "TLS handshake with https://pypi.example/simple/ failed ([SSL: WRONG_VERSION_NUMBER]", 0),
      0u)
      << d.summary;

  d = pip("ERROR: HTTP error 403 while getting http://localhost:1/f.whl\n", "", "localhost:1");
  EXPECT_EQ(d.cause, "blocked_by_policy");
  EXPECT_EQ(
      d.summary.rfind(
          "blocked by the egress policy: the installer tried to reach localhost:1, which is not a "
          "configured package index",
          0),
      0u);
}

TEST(InstallDiagnosisTest, PipBuildFailureDiskFullConflict) {
  auto d =
      pip("  error: subprocess-exited-with-error\n  \n  × python setup.py bdist_wheel did not run "
          "successfully.\n"
          "  │ exit code: 1\n  ╰─> [40 lines of output]\n      gcc: fatal error: no input files\n"
          "  ERROR: Failed building wheel for fastthing\nERROR: Could not build wheels for "
          "fastthing, which is required "
          "to install pyproject.toml-based projects\n");
  EXPECT_EQ(d.cause, "build_failed");
  EXPECT_EQ(d.summary.rfind("build failure: ERROR: Failed building wheel for fastthing (", 0), 0u)
      << d.summary;
  EXPECT_EQ(pip("ERROR: Could not install packages due to an OSError: [Errno 28] No space left on "
                "device\n")
                .cause,
            "disk_full");
  d =
      pip("ERROR: Cannot install a==1 and b==2 because these package versions have conflicting "
          "dependencies.\n"
          "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/...\n");
  EXPECT_EQ(d.cause, "dependency_conflict");
  EXPECT_EQ(d.summary,
            "dependency conflict: ERROR: Cannot install a==1 and b==2 because these package "
            "versions have "
            "conflicting dependencies.; loosen the version constraints");
}

TEST(InstallDiagnosisTest, Npm) {
  auto d =
      npm("npm error code E404\nnpm error 404 Not Found - GET https://registry.example/nosuch-pkg "
          "- Not found\n"
          "npm error 404\nnpm error 404  The requested resource 'nosuch-pkg@*' could not be found "
          "or you do not have "
          "permission to access it.\n");
  EXPECT_EQ(d.cause, "package_not_found");
  EXPECT_EQ(d.summary,
            "package not found: nosuch-pkg@* is not on the registry https://registry.example/; "
            "check the name's spelling");
  d = npm("npm error code ETARGET\nnpm error notarget No matching version found for demo@9.9.9.\n");
  EXPECT_EQ(d.cause, "no_matching_version");
  EXPECT_EQ(d.summary,
            "no matching version: demo@9.9.9 is not published on https://registry.example/");
  d =
      npm("npm error code SELF_SIGNED_CERT_IN_CHAIN\nnpm error errno SELF_SIGNED_CERT_IN_CHAIN\n"
          "npm error request to https://registry.example/demo failed, reason: self-signed "
          "certificate in certificate "
          "chain\n");
  EXPECT_EQ(d.cause, "tls_verification_failed");
  EXPECT_NE(d.summary.find("SSL_CERT_FILE or NODE_EXTRA_CA_CERTS"), std::string::npos) << d.summary;
  d =
      npm("npm ERR! code ECONNREFUSED\nnpm ERR! errno ECONNREFUSED\nnpm ERR! request to "
          "https://registry.example/x "
          "failed, reason: connect ECONNREFUSED 127.0.0.1:443\n");
  EXPECT_EQ(d.cause, "index_unreachable");
  d =
      npm("npm error code 1\nnpm error path /workspace/.sandcastle/node/node_modules/native\n"
          "npm error command failed\nnpm error command sh -c node-gyp rebuild\nnpm error gyp ERR! "
          "build error\n");
  EXPECT_EQ(d.cause, "build_failed");
  EXPECT_EQ(d.summary.rfind("build failure: command sh -c node-gyp rebuild (", 0), 0u) << d.summary;
  EXPECT_EQ(
      npm("npm error code ERESOLVE\nnpm error ERESOLVE unable to resolve dependency tree\n").cause,
      "dependency_conflict");
  EXPECT_EQ(npm("npm error code EINTEGRITY\nnpm error sha512-x integrity checksum failed\n").cause,
            "integrity_mismatch");
}

TEST(InstallDiagnosisTest, IndexCredentialsAreNeverQuoted) {
  EXPECT_EQ(redact_url("https://user:tok3n@mirror.corp/simple/"),
            "https://***@mirror.corp/simple/");
  EXPECT_EQ(redact_url("https://mirror.corp/a@b/"), "https://mirror.corp/a@b/");
  EXPECT_EQ(redact_url("--index-url"), "--index-url");
  auto d = diagnose_install({"pip", 1, "", "ERROR: No matching distribution found for x\n",
                             "https://user:tok3n@mirror.corp/simple/", "", false, ""});
  EXPECT_EQ(d.summary.find("tok3n"), std::string::npos) << d.summary;
  EXPECT_NE(d.summary.find("https://***@mirror.corp/simple/"), std::string::npos) << d.summary;
}

TEST(InstallDiagnosisTest, UnknownFailureQuotesTheLastLines) {
  auto d = diagnose_install({"pip", 2, "", "one\ntwo\n\nthree\nfour\n\n", "x", "", false, ""});
  EXPECT_EQ(d.cause, "installer_failed");
  EXPECT_EQ(d.summary, "installer exited 2; last lines: two | three | four");
  EXPECT_EQ(diagnose_install({"npm", 137, "", "", "x", "", false, ""}).summary,
            "installer exited 137; it printed nothing");
  EXPECT_EQ(diagnose_install({"npm", 1, "only stdout\n", "", "x", "", false, ""}).summary,
            "installer exited 1; last lines: only stdout");
}

// Hostile output: escapes and newlines never reach the one line, quoted
// parts are bounded, and only the tail is scanned.
TEST(InstallDiagnosisTest, HostileOutputIsBoundedAndPrintable) {
  std::string huge(std::size_t{100} * 1024, 'A');
  auto d = pip("ERROR: Could not find a version that satisfies the requirement \x1b[31m" + huge +
               " (from versions: 1.0)\n");
  EXPECT_EQ(d.cause, "no_matching_version");
  EXPECT_LT(d.summary.size(), 400u);
  EXPECT_EQ(d.summary.find('\x1b'), std::string::npos);
  d = diagnose_install(
      {"pip", 1, "", "\x1b]0;title\x07\r\nevil\x1b[2J line\n", "x", "", false, ""});
  EXPECT_EQ(d.summary, "installer exited 1; last lines: ]0;title | evil [2J line");
  for (char c : d.summary) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f);
  // A cause beyond the scanned tail is not seen: the fallback speaks.
  EXPECT_EQ(pip("ERROR: Could not find a version that satisfies the requirement " +
                std::string(1 << 20, 'A') + " (from versions: 1.0)\n")
                .cause,
            "installer_failed");
  d = pip("CERTIFICATE_VERIFY_FAILED\n" + std::string(kDiagnosisScanBytes, 'x') + "\n");
  EXPECT_EQ(d.cause, "installer_failed");
  EXPECT_LT(d.summary.size(), 300u);
  // A cut never splits a UTF-8 sequence.
  EXPECT_EQ(one_line("ab\xc3\xa9", 3), "ab…");
}

}  // namespace
}  // namespace sandcastle::service
