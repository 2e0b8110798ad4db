// sandbox:// resource URIs: what execute_code links and resources/read parses.
#include <gtest/gtest.h>

#include "service/kernel.h"
#include "tools/resource_methods.h"

namespace sandcastle::tools {
namespace {

using namespace sandcastle::service;  // the kernel's names

TEST(SandboxUri, RoundTripsPathsWithSpacesAndUnicode) {
  const std::string uri = sandbox_resource_uri("sb-1", "results/my plot #1 é.png");
  EXPECT_EQ(uri, "sandbox://sb-1/results/my%20plot%20%231%20%C3%A9.png");
  auto p = parse_sandbox_uri(uri);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->sandbox_id, "sb-1");
  EXPECT_EQ(p->path, "results/my plot #1 é.png");
}

TEST(SandboxUri, RefusesOtherSchemesAndBadEncodings) {
  EXPECT_FALSE(parse_sandbox_uri("file:///etc/passwd"));
  EXPECT_FALSE(parse_sandbox_uri("sandbox://sb-1"));
  EXPECT_FALSE(parse_sandbox_uri("sandbox://sb-1/"));
  EXPECT_FALSE(parse_sandbox_uri("sandbox:///x.txt"));
  EXPECT_FALSE(parse_sandbox_uri("sandbox://sb-1/a%2"));
  EXPECT_FALSE(parse_sandbox_uri("sandbox://sb-1/a%zz"));
  EXPECT_FALSE(parse_sandbox_uri("sandbox://sb-1/a%00b"));
}

TEST(KernelLanguage, OnlyPythonAndJavaScriptHaveKernels) {
  EXPECT_EQ(kernel_language_for("python"), KernelLanguage::kPython);
  EXPECT_EQ(kernel_language_for("javascript"), KernelLanguage::kJavaScript);
  EXPECT_FALSE(kernel_language_for("bash"));
  EXPECT_STREQ(cell_end_name(CellEnd::kKernelDied), "kernel_died");
}

}  // namespace
}  // namespace sandcastle::tools
