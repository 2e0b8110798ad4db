#include "service/languages.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace sandcastle::service {
namespace {

TEST(LanguagesTest, FindsByNameAndAliasCaseInsensitively) {
  auto py = find_language("Python3");
  ASSERT_TRUE(py.ok()) << py.error().message();
  EXPECT_EQ((*py)->name, "python");
  EXPECT_EQ((*find_language("JS"))->name, "javascript");
  EXPECT_EQ((*find_language("c++"))->name, "cpp");
}

TEST(LanguagesTest, UnknownLanguageListsAvailableOnes) {
  auto r = find_language("cobol-2077");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().context.find("available languages: python, javascript, bash, sh, c, cpp"),
            std::string::npos)
      << r.error().context;
}

// Whatever this host has installed: a row whose toolchain is missing.
TEST(LanguagesTest, MissingToolchainIsUnavailableNotUnknown) {
  std::vector<Language> table = {all_languages().front(),
                                 {"cobol",
                                  {"cbl"},
                                  "main.cob",
                                  {},
                                  {"/nonexistent/cobc", "{src}"},
                                  "",
                                  {"/nonexistent/cobc"}}};
  ASSERT_EQ(table.front().name, "python");
  for (const char* name : {"cobol", "CBL"}) {
    auto r = find_language(name, table);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
    EXPECT_EQ(r.error().context,
              "language 'cobol' is not installed on this host (missing /nonexistent/cobc); "
              "available languages: python");
  }
  EXPECT_EQ(available_language_names(table), std::vector<std::string>{"python"});
  EXPECT_EQ(find_language("fortran", table).error().code, ErrorCode::kInvalidArgument);
}

TEST(LanguagesTest, ExpandsTemplates) {
  auto c = *find_language("c");
  auto argv = expand_argv(c->compile, "/tmp/x", "/tmp/x/main.c", "/tmp/x/main");
  EXPECT_EQ(argv, (std::vector<std::string>{"/usr/bin/gcc", "-O2", "-pipe", "-o", "/tmp/x/main",
                                            "/tmp/x/main.c", "-lm"}));
  EXPECT_EQ(expand_argv(c->run, "/tmp/x", "/tmp/x/main.c", "/tmp/x/main"),
            std::vector<std::string>{"/tmp/x/main"});
}

// The JVM's heap follows the sandbox's memory limit; with no limit the
// argument that would name it is left out.
TEST(LanguagesTest, MemoryLimitReachesTheArgvOrDropsItsArgument) {
  const std::vector<std::string> tmpl = {"/usr/bin/java", "-XX:MaxRAM={memory_mb}m", "-cp", "{dir}",
                                         "Main"};
  EXPECT_EQ(
      expand_argv(tmpl, "/tmp/x", "/tmp/x/Main.java", "/tmp/x/main", 128ULL << 20),
      (std::vector<std::string>{"/usr/bin/java", "-XX:MaxRAM=128m", "-cp", "/tmp/x", "Main"}));
  EXPECT_EQ(expand_argv(tmpl, "/tmp/x", "/tmp/x/Main.java", "/tmp/x/main", 0),
            (std::vector<std::string>{"/usr/bin/java", "-cp", "/tmp/x", "Main"}));
  EXPECT_EQ(expand_argv(tmpl, "/tmp/x", "/tmp/x/Main.java", "/tmp/x/main"),
            (std::vector<std::string>{"/usr/bin/java", "-cp", "/tmp/x", "Main"}));
  const auto& table = all_languages();
  auto it =
      std::find_if(table.begin(), table.end(), [](const Language& l) { return l.name == "java"; });
  ASSERT_NE(it, table.end());
  const Language& java = *it;
  for (const auto* step : {&java.compile, &java.run}) {
    auto argv = expand_argv(*step, "/d", "/d/Main.java", "/d/main", 512ULL << 20);
    EXPECT_TRUE(std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
      return a.find("MaxRAM=512m") != std::string::npos;
    })) << argv.front();
  }
}

}  // namespace
}  // namespace sandcastle::service
