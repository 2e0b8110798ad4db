// The kernels (tools/kernel.h) against real sandboxes and the real drivers:
// back-to-back cells never lose a request, and an interrupt only ever
// reaches the cell it names.
#include "tools/kernel.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "../sandbox/fixture.h"

namespace sandcastle::tools {
namespace {

using namespace std::chrono_literals;

class KernelTest : public sandbox::testing::SandboxTest {
 protected:
  static CellRequest cell(std::string code, std::chrono::milliseconds timeout = 10s) {
    CellRequest r;
    r.code = std::move(code);
    r.timeout = timeout;
    return r;
  }
  static std::string plain(const CellResult& r) {
    return r.value.is_object() ? r.value.value("text/plain", "") : "";
  }
};

// Each cell's request follows the previous result at once; each prints,
// sleeps 2 ms and prints again. The Python driver once let its flush thread
// race the main thread for the socket: that thread could swallow the next
// execute, and the cell hung for its whole timeout (one run in two of 150 cells
// of this shape failed; in CI, a 2-second cell hung).
void back_to_back(sandbox::Sandbox& sb, KernelLanguage lang, const std::string& before_sleep,
                  const std::string& sleep, const std::string& after_sleep, int cells) {
  Kernel k(sb, lang);
  for (int i = 0; i < cells; ++i) {
    const std::string n = std::to_string(i);
    CellRequest req;
    req.code = before_sleep + n + ")\n" + sleep + "\n" + after_sleep + n + ")\nv = " + n + "\nv";
    req.timeout = 10s;
    auto r = k.execute(req);
    ASSERT_TRUE(r.ok()) << "cell " << i << ": " << r.error().message();
    ASSERT_EQ(r->end, CellEnd::kCompleted) << "cell " << i << " ended " << cell_end_name(r->end);
    ASSERT_EQ(r->value.value("text/plain", ""), n) << "cell " << i;
    ASSERT_EQ(r->stdout_data, "a " + n + "\nb " + n + "\n") << "cell " << i;
  }
}

TEST_F(KernelTest, PythonBackToBackCellsAllAnswer) {
  back_to_back(*sb_, KernelLanguage::kPython, "import time\nprint('a', ", "time.sleep(0.002)",
               "print('b', ", 400);
}

TEST_F(KernelTest, JavaScriptBackToBackCellsAllAnswer) {
  back_to_back(*sb_, KernelLanguage::kJavaScript, "console.log('a', ",
               "await new Promise((r) => setTimeout(r, 2));", "console.log('b', ", 150);
}

// A cancelled loop is interrupted (KeyboardInterrupt), the state survives,
// and the cells right after it are never hit by that interrupt.
TEST_F(KernelTest, PythonCancelInterruptsOnlyThatCell) {
  Kernel k(*sb_, KernelLanguage::kPython);
  ASSERT_EQ(plain(*k.execute(cell("x = 41\nx"))), "41");
  for (int round = 0; round < 5; ++round) {
    mcp::CancelToken cancel;
    std::thread t([&] {
      std::this_thread::sleep_for(100ms);
      cancel.cancel();
    });
    auto r = k.execute(cell("while True:\n    pass"), {}, &cancel);
    t.join();
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->end, CellEnd::kCancelled);
    EXPECT_FALSE(r->state_lost);
    ASSERT_TRUE(r->error.is_object());
    EXPECT_EQ(r->error.value("name", ""), "KeyboardInterrupt");
    for (int i = 0; i < 20; ++i) {
      auto next = k.execute(cell("x"));
      ASSERT_TRUE(next.ok());
      ASSERT_EQ(next->end, CellEnd::kCompleted) << "round " << round << " cell " << i;
      ASSERT_TRUE(next->error.is_null()) << next->error.dump();
      ASSERT_EQ(plain(*next), "41");
    }
  }
}

// Synchronous JavaScript cannot read the in-band interrupt: the sandbox sends
// the kernel SIGINT, which stops the script; the state survives.
TEST_F(KernelTest, JavaScriptSyncLoopIsInterruptedBySigint) {
  Kernel k(*sb_, KernelLanguage::kJavaScript);
  ASSERT_EQ(plain(*k.execute(cell("var kept = 41; kept"))), "41");
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = k.execute(cell("while (true) {}", 300ms));
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->end, CellEnd::kTimeout);
    EXPECT_FALSE(r->state_lost) << "interrupted, not killed";
    ASSERT_TRUE(r->error.is_object());
    EXPECT_EQ(r->error.value("name", ""), "Interrupted");
    EXPECT_LT(took, 1500ms);
    auto next = k.execute(cell("kept + 1"));
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(next->end, CellEnd::kCompleted);
    EXPECT_EQ(plain(*next), "42");
  }
}

// A cell that is still queued behind a running one is cancelled without
// ever running.
TEST_F(KernelTest, QueuedCellCancelledBeforeItRuns) {
  Kernel k(*sb_, KernelLanguage::kPython);
  ASSERT_EQ(plain(*k.execute(cell("1"))), "1");
  std::thread slow([&] { (void)k.execute(cell("import time\ntime.sleep(0.5)\nran_slow = True")); });
  std::this_thread::sleep_for(100ms);
  mcp::CancelToken cancel;
  cancel.cancel();
  auto r = k.execute(cell("ran_queued = True"), {}, &cancel);
  slow.join();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, CellEnd::kCancelled);
  EXPECT_EQ(plain(*k.execute(cell("'ran_slow' in globals(), 'ran_queued' in globals()"))),
            "(True, False)");
}

}  // namespace
}  // namespace sandcastle::tools
