// Settings of the seeds' users that sandcastle cannot honour refuse the
// start with what to do (config/start_checks.h).
#include "config/start_checks.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "net/user_net.h"

namespace sandcastle::config {
namespace {

TEST(StartChecks, DefaultsPass) {
  Config cfg;
  auto c = check_start_settings(cfg, {});
  EXPECT_TRUE(c.errors.empty());
  EXPECT_TRUE(c.warnings.empty());
}

// "full" is offered where this host can run it, and otherwise refused at
// start with the reason (a missing package, /dev/net/tun closed to us).
TEST(StartChecks, AnUnknownProfileIsRefusedListingTheKnownOnes) {
  Config cfg;
  cfg.profile = "seed-z";
  auto c = check_start_settings(cfg, {});
  ASSERT_EQ(c.errors.size(), 1U);
  EXPECT_EQ(c.errors[0].rfind("server.profile: unknown profile 'seed-z' (sandcastle", 0), 0U)
      << c.errors[0];
  for (const char* known : kProfiles) {
    cfg.profile = known;
    EXPECT_TRUE(check_start_settings(cfg, {}).errors.empty()) << known;
  }
}

TEST(StartChecks, NetworkModeFullOnlyWhereItCanRun) {
  Config cfg;
  cfg.network_modes = {"none", "allowlist", "full"};
  auto c = check_start_settings(cfg, {});
  if (auto s = net::full_mode_available(); s) {
    EXPECT_TRUE(c.errors.empty()) << c.errors.at(0);
  } else {
    ASSERT_EQ(c.errors.size(), 1u);
    EXPECT_EQ(c.errors[0], "network.modes: mode \"full\" cannot run here: " + s.error().message() +
                               "; drop it from network.modes, or fix the host");
  }
  cfg.network_modes = {"none", "fuller"};
  c = check_start_settings(cfg, {});
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_EQ(c.errors[0], "network.modes: unknown mode 'fuller' (none, allowlist, full)");
}

TEST(StartChecks, InterpreterTypeE2bIsRefusedNamingTheVariable) {
  Config cfg;
  cfg.backend = "e2b";
  StartInputs in;
  in.backend_origin = "INTERPRETER_TYPE";
  in.env["E2B_API_KEY"] = "e2b_123";
  auto c = check_start_settings(cfg, in);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_EQ(c.errors[0].rfind("INTERPRETER_TYPE=e2b: ", 0), 0u) << c.errors[0];
  EXPECT_NE(c.errors[0].find("unset INTERPRETER_TYPE"), std::string::npos);
  EXPECT_NE(c.errors[0].find("no E2B account or E2B_API_KEY is needed"), std::string::npos);
  EXPECT_TRUE(c.warnings.empty());  // the error already covers the key
}

TEST(StartChecks, BackendFromFlagOrFileIsNamedAsWritten) {
  Config cfg;
  cfg.backend = "docker";
  StartInputs flag;
  flag.backend_origin = "--backend";
  EXPECT_EQ(check_start_settings(cfg, flag).errors.at(0).rfind("--backend docker: ", 0), 0u);
  StartInputs file;
  file.backend_origin = "the config file";
  EXPECT_EQ(check_start_settings(cfg, file).errors.at(0).rfind(
                "sandbox.backend = \"docker\" in the config file", 0),
            0u);
}

TEST(StartChecks, EngineBackendIsKnownAndItsImagesAreTheEngines) {
  Config cfg;
  cfg.backend = "engine";
  StartInputs in;
  in.backend_origin = "INTERPRETER_TYPE";
  in.no_store_reason = "the store failed to open";
  in.env["CONTAINER_IMAGE"] = "python:3.12-slim";
  in.foreign_flags["--js-image"] = "node:22";
  auto c = check_start_settings(cfg, in);
  EXPECT_TRUE(c.errors.empty()) << c.errors.at(0);
}

TEST(StartChecks, ImagesNeedAStore) {
  Config cfg;
  StartInputs in;
  in.no_store_reason = "the store failed to open";
  in.env["CONTAINER_IMAGE"] = "philschmi/code-sandbox-python:latest";
  in.foreign_flags["--python-image"] = "python:3.12";
  auto c = check_start_settings(cfg, in);
  ASSERT_EQ(c.errors.size(), 2u);
  EXPECT_EQ(c.errors[0].rfind("CONTAINER_IMAGE=philschmi/code-sandbox-python:latest: this server has no image "
                              "store (the store failed to open)",
                              0),
            0u)
      << c.errors[0];
  EXPECT_NE(c.errors[0].find("unset CONTAINER_IMAGE"), std::string::npos);
  EXPECT_EQ(c.errors[1].rfind("--python-image python:3.12: ", 0), 0u);
  in.env["CONTAINER_IMAGE"] = "host";  // needs no store
  in.foreign_flags.clear();
  EXPECT_TRUE(check_start_settings(cfg, in).errors.empty());
}

// An image setting starts the server only when the store has the image with
// the setting's language; otherwise the start is refused saying which.
TEST(StartChecks, ImagesMustExistAndHaveTheirLanguage) {
  Config cfg;
  StartInputs in;
  in.default_language = "python";
  in.image_languages = [](const std::string& image) -> Result<std::vector<std::string>> {
    if (image == "py") return std::vector<std::string>{"python", "sh"};
    if (image == "node") return std::vector<std::string>{"javascript"};
    return Error::make(ErrorCode::kNotFound, "no image '" + image + "' in the store");
  };
  in.env["CONTAINER_IMAGE"] = "py";
  in.foreign_flags["--python-image"] = "py";
  in.foreign_flags["--js-image"] = "node";
  EXPECT_TRUE(check_start_settings(cfg, in).errors.empty());

  in.env["CONTAINER_IMAGE"] = "node";  // the default language is python
  in.foreign_flags["--python-image"] = "missing";
  in.foreign_flags["--js-image"] = "py";
  auto c = check_start_settings(cfg, in);
  ASSERT_EQ(c.errors.size(), 3u);
  EXPECT_EQ(c.errors[0],
            "CONTAINER_IMAGE=node: image 'node' has no interpreter for python (its languages: "
            "javascript). Pick an image with python, or unset CONTAINER_IMAGE (CONTAINER_LANGUAGE alone "
            "still picks the default language)");
  EXPECT_EQ(c.errors[1].rfind("--js-image py: image 'py' has no interpreter for javascript", 0), 0u)
      << c.errors[1];
  EXPECT_EQ(c.errors[2].rfind("--python-image missing: no image 'missing' in the store. Import, pull or build it "
                              "first",
                              0),
            0u)
      << c.errors[2];
  EXPECT_NE(c.errors[2].find("or drop --python-image"), std::string::npos);
}

TEST(StartChecks, AnE2bKeyAloneOnlyWarns) {
  Config cfg;
  StartInputs in;
  in.env["E2B_API_KEY"] = "e2b_123";
  auto c = check_start_settings(cfg, in);
  EXPECT_TRUE(c.errors.empty());
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("E2B_API_KEY"), std::string::npos);
  EXPECT_EQ(c.warnings[0].find("e2b_123"), std::string::npos);  // never echoes the secret
}

TEST(ConfigShowJson, EverySettingWithValueAndSource) {
  Loader l;
  ASSERT_TRUE(l.set("server.port", "9000").ok());
  auto j = nlohmann::json::parse(l.show_json());
  EXPECT_EQ(j["server.port"]["value"], 9000);
  EXPECT_EQ(j["server.port"]["source"], "flag");
  EXPECT_EQ(j["server.transport"]["value"], "stdio");
  EXPECT_EQ(j["server.transport"]["source"], "default");
  EXPECT_TRUE(j["http.allowed_origins"]["value"].is_array());
  EXPECT_EQ(j.size(), settings().size());
}

}  // namespace
}  // namespace sandcastle::config
