#include "tools/languages.h"

#include <gtest/gtest.h>

namespace sandcastle::tools {
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

TEST(LanguagesTest, MissingToolchainIsUnavailableNotUnknown) {
  for (const auto& l : all_languages()) {
    if (language_available(l)) continue;
    auto r = find_language(l.name);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
    EXPECT_NE(r.error().context.find("is not installed on this host"), std::string::npos);
    return;
  }
  GTEST_SKIP() << "every language's toolchain is installed here";
}

TEST(LanguagesTest, ExpandsTemplates) {
  auto c = *find_language("c");
  auto argv = expand_argv(c->compile, "/tmp/x", "/tmp/x/main.c", "/tmp/x/main");
  EXPECT_EQ(argv, (std::vector<std::string>{"/usr/bin/gcc", "-O2", "-pipe", "-o", "/tmp/x/main",
                                            "/tmp/x/main.c", "-lm"}));
  EXPECT_EQ(expand_argv(c->run, "/tmp/x", "/tmp/x/main.c", "/tmp/x/main"),
            std::vector<std::string>{"/tmp/x/main"});
}

}  // namespace
}  // namespace sandcastle::tools
