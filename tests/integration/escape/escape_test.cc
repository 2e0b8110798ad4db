// Hostile programs: each tries one escape and must get one exact denial.
// C programs are compiled inside the sandbox with the host's gcc (bound
// read-only at /usr); Python ones run with /usr/bin/python3. After each, a
// neighbour sandbox and the host-side listeners prove nothing leaked.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../sandbox/fixture.h"
#include "escape_cases.h"

namespace sandcastle::sandbox::testing {
namespace {

using escape::Case;
using escape::slurp;

class EscapeTest : public ::testing::TestWithParam<Case> {
 public:
  static void SetUpTestSuite() {
    std::string why;
    auto* backend = shared_backend(&why);
    ASSERT_NE(backend, nullptr) << why;
    auto spec = SandboxSpec::create({});
    auto h = backend->create(*spec);
    ASSERT_TRUE(h.ok()) << h.error().message();
    hostile_ = std::move(*h).release();
    auto n = backend->create(*spec);
    ASSERT_TRUE(n.ok()) << n.error().message();
    neighbour_ = std::move(*n).release();
    ASSERT_TRUE(neighbour_->write_file("/workspace/canary", "intact").ok());

    ASSERT_TRUE(hostile_->mkdir("/workspace/esc").ok());
    int copied = 0;
    for (const auto& e : list_programs()) {
      ASSERT_TRUE(
          hostile_->write_file("/workspace/esc/" + e, slurp(escape::program_dir() + "/" + e)).ok());
      ++copied;
    }
    ASSERT_GE(copied, 40);
    ExecRequest req;
    req.argv = {"/bin/sh", "-c", escape::build_script("/workspace/esc", false)};
    req.timeout = std::chrono::seconds(90);
    auto r = hostile_->exec(req);
    ASSERT_TRUE(r.ok()) << r.error().message();
    ASSERT_EQ(r->exit_code, 0) << r->stderr_data;

    open_listeners();
  }

  static void open_listeners() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(listener_, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);

    abstract_ = "sandcastle-escape-" + std::to_string(::getpid());
    unix_listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un u{};
    u.sun_family = AF_UNIX;
    std::memcpy(u.sun_path + 1, abstract_.data(), abstract_.size());
    ASSERT_EQ(::bind(unix_listener_, reinterpret_cast<sockaddr*>(&u),
                     static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + abstract_.size())),
              0);
    ASSERT_EQ(::listen(unix_listener_, 8), 0);
  }

  static void TearDownTestSuite() {
    if (hostile_) (void)hostile_->destroy();
    if (neighbour_) (void)neighbour_->destroy();
    delete hostile_;
    delete neighbour_;
    hostile_ = neighbour_ = nullptr;
    ::close(listener_);
    ::close(unix_listener_);
  }

  static std::vector<std::string> list_programs() { return escape::list_programs(); }

  // Arguments some programs need: facts only the host knows.
  static escape::HostFacts facts() {
    escape::HostFacts f;
    f.loopback_port = port_;
    f.abstract_name = abstract_;
    return f;
  }

  static void expect_nothing_leaked() {
    EXPECT_EQ(::accept(listener_, nullptr, nullptr), -1) << "a sandbox reached the host's loopback";
    EXPECT_EQ(::accept(unix_listener_, nullptr, nullptr), -1) << "a sandbox reached a host unix socket";
    auto canary = neighbour_->read_file("/workspace/canary");
    ASSERT_TRUE(canary.ok());
    EXPECT_EQ(canary->data, "intact");
    ExecRequest req;
    req.argv = {"/bin/echo", "ok"};
    auto r = neighbour_->exec(req);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->stdout_data, "ok\n");
  }

  static Sandbox* hostile_;
  static Sandbox* neighbour_;
  static int listener_;
  static int unix_listener_;
  static int port_;
  static std::string abstract_;
};

Sandbox* EscapeTest::hostile_ = nullptr;
Sandbox* EscapeTest::neighbour_ = nullptr;
int EscapeTest::listener_ = -1;
int EscapeTest::unix_listener_ = -1;
int EscapeTest::port_ = 0;
std::string EscapeTest::abstract_;

// One hostile program in hostile_; `image`: the sandboxes are rooted in an
// image (image_root.h), where / is the sandbox's own copy-on-write layer.
void run_case(const Case& c, bool image) {
  ASSERT_NE(EscapeTest::hostile_, nullptr);
  std::string program = c.program;
  std::string base = program.substr(0, program.rfind('.'));
  auto r = EscapeTest::hostile_->exec(
      escape::program_request(program, "/workspace/esc", EscapeTest::facts()));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reason, EndReason::kExited) << r->stderr_data;
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  std::string expected = escape::expected_for(base, c.expected);
  // On an image, /usr and /etc are the sandbox's own layer: a write there
  // succeeds and stays in its upper dir (ImageSandboxTest proves the image
  // on disk unchanged); it is no escape.
  if (image && (base == "write_usr" || base == "write_etc")) expected = "OK\n";
  EXPECT_EQ(r->stdout_data, expected) << "stderr: " << r->stderr_data;
  EscapeTest::expect_nothing_leaked();
}

TEST_P(EscapeTest, IsDenied) { run_case(GetParam(), false); }

// The same programs in sandboxes rooted in an image: one made from the
// host's files (python3, busybox, su marked setuid), the C programs built
// static in a host sandbox and copied in.
class EscapeImageTest : public EscapeTest {
 public:
  static void SetUpTestSuite() {
    std::string why;
    auto* backend = shared_backend(&why);
    ASSERT_NE(backend, nullptr) << why;
    const native::ImageRoot* py = host_python_image(&why);
    ASSERT_NE(py, nullptr) << why;
    auto host_spec = SandboxSpec::create({});
    auto builder = backend->create(*host_spec);
    ASSERT_TRUE(builder.ok()) << builder.error().message();
    auto& b = **builder;
    ASSERT_TRUE(b.mkdir("/workspace/esc").ok());
    const auto programs = list_programs();
    for (const auto& e : programs)
      ASSERT_TRUE(b.write_file("/workspace/esc/" + e, slurp(escape::program_dir() + "/" + e)).ok());
    ExecRequest req;
    req.argv = {"/bin/sh", "-c", escape::build_script("/workspace/esc", true)};
    req.timeout = std::chrono::seconds(120);
    auto built = b.exec(req);
    ASSERT_TRUE(built.ok()) << built.error().message();
    ASSERT_EQ(built->exit_code, 0) << built->stderr_data;

    SpecOptions o;
    o.image = py->name;
    auto spec = SandboxSpec::create(o);
    auto h = backend->create(*spec);
    ASSERT_TRUE(h.ok()) << h.error().message();
    hostile_ = std::move(*h).release();
    auto n = backend->create(*spec);
    ASSERT_TRUE(n.ok()) << n.error().message();
    neighbour_ = std::move(*n).release();
    ASSERT_TRUE(neighbour_->write_file("/workspace/canary", "intact").ok());
    ASSERT_TRUE(hostile_->mkdir("/workspace/esc").ok());
    for (const auto& e : programs) {
      if (e.ends_with(".c")) {
        const std::string bin = e.substr(0, e.size() - 2);
        auto data = b.read_file("/workspace/esc/" + bin, ReadRange{0, 64 << 20, true});
        ASSERT_TRUE(data.ok()) << bin << ": " << data.error().message();
        ASSERT_TRUE(hostile_->write_file("/workspace/esc/" + bin, data->data, 0755).ok()) << bin;
      } else {
        ASSERT_TRUE(
            hostile_->write_file("/workspace/esc/" + e, slurp(escape::program_dir() + "/" + e))
                .ok());
      }
    }
    (void)b.destroy();
    open_listeners();
  }
};

TEST_P(EscapeImageTest, IsDenied) { run_case(GetParam(), true); }

INSTANTIATE_TEST_SUITE_P(HostileOnImage, EscapeImageTest, ::testing::ValuesIn(escape::cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return escape::case_name(p.param);
                         });

INSTANTIATE_TEST_SUITE_P(Hostile, EscapeTest, ::testing::ValuesIn(escape::cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return escape::case_name(p.param);
                         });

}  // namespace
}  // namespace sandcastle::sandbox::testing
