// The tools on image sandboxes: list_images, create_sandbox {image},
// execute_code's language check against the image, execute_command in an
// image without bash, and a python kernel in an image that has python.
#include <gtest/gtest.h>

#include "../sandbox/fixture.h"
#include "images/image_store.h"
#include "mcp/server.h"
#include "service/kernel.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {
namespace {

using mcp::json;

// The image store's interface over images made in the test (the store's own
// implementation is tested with it; here it only has to answer find/list).
class TestStore : public images::ImageStore {
 public:
  void add(const sandbox::native::ImageRoot& root, std::uint64_t size) {
    images::ImageRecord r;
    r.id = root.id;
    r.name = root.name;
    r.languages = root.languages;
    r.size_bytes = size;
    r.created = std::chrono::system_clock::now();
    r.source = "import:rootfs";
    records_.push_back(r);
    layers_[r.id] = root.layers;
  }
  Result<images::ImageRecord> import(const std::string&, const images::ImportOptions&) override {
    return Error::make(ErrorCode::kUnavailable, "not in this test");
  }
  Result<images::ImageRecord> find(const std::string& ref) const override {
    for (const auto& r : records_)
      if (r.name == ref || r.id == ref) return r;
    return Error::make(ErrorCode::kNotFound, "no image '" + ref + "'");
  }
  std::vector<images::ImageRecord> list() const override { return records_; }
  Result<std::vector<std::string>> layer_dirs(const images::ImageRecord& image) const override {
    return layers_.at(image.id);
  }
  Status remove(const std::string&, const std::function<std::vector<std::string>(const std::string&)>&) override {
    return Error::make(ErrorCode::kUnavailable, "not in this test");
  }
  Result<images::ImageRecord> add_layer(const images::ImageRecord&, const std::string&,
                                        const std::string&, const images::ImageConfig&,
                                        const std::string&, const std::string&) override {
    return Error::make(ErrorCode::kUnavailable, "not in this test");
  }
  Status check_name(const std::string&, const std::string&) const override {
    return Error::make(ErrorCode::kUnavailable, "not in this test");
  }
  Status mark_in_use(const std::string&, const std::string&) override { return {}; }
  Status release(const std::string&, const std::string&) override { return {}; }

 private:
  std::vector<images::ImageRecord> records_;
  std::map<std::string, std::vector<std::string>> layers_;
};

class ImageToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = sandbox::testing::shared_backend(&why);
    ASSERT_NE(backend_, nullptr) << why;
    py_ = sandbox::testing::host_python_image(&why);
    ASSERT_NE(py_, nullptr) << why;
    // A shell-only image: the python image's layer without python's name.
    auto sh = *py_;
    sh.name = "sh-only";
    sh.id = "sha256:test-sh-only";
    sh.languages = {"sh"};
    sandbox::testing::add_test_image(sh);
    store_.add(*py_, 70 << 20);
    store_.add(sh, 70 << 20);
    manager_ = std::make_unique<SandboxManager>(*backend_, ManagerOptions{});
    env_ = std::make_unique<ToolEnv>(ToolEnv{*manager_, ToolConfig{}, &store_});
    register_sandbox_tools(server_, *env_);
  }
  void TearDown() override { manager_.reset(); }

  mcp::ToolResult call(const std::string& tool, const json& args) {
    mcp::RequestContext ctx([](const json&) {}, json(1), std::nullopt, mcp::Era::kLegacy, "2025-06-18", 0,
                            &cancel_);
    return server_.tools().call(tool, args, ctx);
  }
  static std::string text(const mcp::ToolResult& r) {
    return r.content.empty() ? std::string() : r.content[0].value("text", "");
  }

  sandbox::Backend* backend_ = nullptr;
  const sandbox::native::ImageRoot* py_ = nullptr;
  TestStore store_;
  std::unique_ptr<SandboxManager> manager_;
  std::unique_ptr<ToolEnv> env_;
  mcp::Server server_;
  sandcastle::CancelToken cancel_;
};

TEST_F(ImageToolsTest, ListImagesShowsHostAndTheStore) {
  auto r = call("list_images", json::object());
  ASSERT_FALSE(r.is_error) << text(r);
  const json& images = r.structured["images"];
  ASSERT_EQ(r.structured["count"], 3);
  EXPECT_EQ(images[0]["name"], "host");
  EXPECT_EQ(images[1]["name"], "py-host");
  EXPECT_EQ(images[1]["languages"], json::array({"python", "sh"}));
  EXPECT_EQ(images[1]["size_bytes"], 70 << 20);
  EXPECT_EQ(images[1]["id"], "sha256:test-py-host");
  EXPECT_EQ(images[2]["name"], "sh-only");
}

TEST_F(ImageToolsTest, CreateSandboxOnAnImageAndRunInIt) {
  auto r = call("create_sandbox", {{"image", "sh-only"}, {"language", "sh"}});
  ASSERT_FALSE(r.is_error) << text(r);
  EXPECT_EQ(r.structured["image"], "sh-only");
  const std::string id = r.structured["sandbox_id"];
  // No bash in this image: execute_command falls back to its sh.
  auto c = call("execute_command", {{"sandbox_id", id}, {"command", "cat /etc/os-release; echo $0"}});
  ASSERT_FALSE(c.is_error) << text(c);
  EXPECT_EQ(c.structured["stdout"], "ID=sandcastle-python-test\n/bin/sh\n") << c.structured.dump();
  auto code = call("execute_code", {{"sandbox_id", id}, {"language", "sh"}, {"code", "echo from-sh"}});
  ASSERT_FALSE(code.is_error) << text(code);
  EXPECT_EQ(code.structured["stdout"], "from-sh\n");
}

TEST_F(ImageToolsTest, LanguagesAreTheImages) {
  auto r = call("create_sandbox", {{"image", "sh-only"}, {"language", "python"}});
  ASSERT_TRUE(r.is_error);
  EXPECT_EQ(text(r),
            "image sh-only has no python3: pick an image with python (list_images), or image 'host' "
            "[invalid_argument]");
  auto ok = call("create_sandbox", {{"image", "sh-only"}, {"language", "sh"}});
  ASSERT_FALSE(ok.is_error) << text(ok);
  auto code = call("execute_code",
                   {{"sandbox_id", ok.structured["sandbox_id"]}, {"language", "javascript"}, {"code", "1"}});
  ASSERT_TRUE(code.is_error);
  EXPECT_EQ(text(code),
            "image sh-only has no node: pick an image with javascript (list_images), or image 'host' "
            "[invalid_argument]");
  auto missing = call("create_sandbox", {{"image", "no-such"}, {"language", "sh"}});
  ASSERT_TRUE(missing.is_error);
  EXPECT_EQ(text(missing), "image 'no-such' not found: list_images shows the images there are [not_found]");
}

TEST_F(ImageToolsTest, PythonRunsAndItsKernelStartsInAnImageWithPython) {
  auto r = call("create_sandbox", {{"image", "py-host"}, {"language", "python"}});
  ASSERT_FALSE(r.is_error) << text(r);
  const std::string id = r.structured["sandbox_id"];
  auto code = call("execute_code", {{"sandbox_id", id},
                                    {"code", "import sys\nx = 6 * 7\nprint(open('/etc/os-release').read().strip())\nx"}});
  ASSERT_FALSE(code.is_error) << text(code);
  EXPECT_EQ(code.structured["stdout"], "ID=sandcastle-python-test\n") << code.structured.dump();
  // The persistent interpreter: state from the cell before.
  auto again = call("execute_code", {{"sandbox_id", id}, {"code", "print(x + 1)"}});
  ASSERT_FALSE(again.is_error) << text(again);
  EXPECT_EQ(again.structured["stdout"], "43\n") << again.structured.dump();
}

}  // namespace
}  // namespace sandcastle::tools
