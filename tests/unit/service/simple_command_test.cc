#include "service/simple_command.h"

#include <gtest/gtest.h>

namespace sandcastle::service {
namespace {

using Words = std::vector<std::string>;

TEST(SimpleCommand, PlainWordsRunDirectly) {
  EXPECT_EQ(simple_command_words("ls -la /tmp"), (Words{"ls", "-la", "/tmp"}));
  EXPECT_EQ(simple_command_words("  python3\tmain.py --n=3  "),
            (Words{"python3", "main.py", "--n=3"}));
  EXPECT_EQ(simple_command_words("/bin/true"), (Words{"/bin/true"}));
  EXPECT_EQ(simple_command_words("pip install numpy==1.26.4 a,b user@host:x +1 50%"),
            (Words{"pip", "install", "numpy==1.26.4", "a,b", "user@host:x", "+1", "50%"}));
}

TEST(SimpleCommand, ShellSyntaxGoesToBash) {
  for (const char* c :
       {"ls | wc", "a && b", "a; b",  "echo $HOME", "ls *.py", "cat 'a b'", "cat \"x\"",
        "ls ~",    "a > f",  "a < f", "f(){ :; }",  "ls\nls",  "ls #c",     "a\\ b",
        "ls [ab]", "x?",     "{a,b}", "(ls)",       "`ls`",    "ls &",      "!ls"})
    EXPECT_FALSE(simple_command_words(c)) << c;
}

TEST(SimpleCommand, BuiltinsAssignmentsAndJobsGoToBash) {
  for (const char* c : {"echo hi", "cd /tmp", "export A=1", "A=1 env", "printf x", "test -f x",
                        "[ -f x ]", ". x", "source x", "exec ls", "type ls", "time ls", "kill 1",
                        "pwd", "%1", "true --help", "false x", "", "   "})
    EXPECT_FALSE(simple_command_words(c)) << '"' << c << '"';
}

TEST(SimpleCommand, TrueFalseAndColonWithoutArgumentsAreThePrograms) {
  EXPECT_EQ(simple_command_words("true"), (Words{"true"}));
  EXPECT_EQ(simple_command_words("false"), (Words{"false"}));
  EXPECT_EQ(simple_command_words(":"), (Words{"true"}));
}

TEST(SimpleCommand, EnvironmentThatSteersBashKeepsBash) {
  EXPECT_TRUE(environment_allows_direct_exec({{"PATH", "/bin"}, {"HOME", "/w"}}));
  for (const char* name : {"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PWD", "SHLVL", "_",
                           "POSIXLY_CORRECT", "BASH_FUNC_ls%%"})
    EXPECT_FALSE(environment_allows_direct_exec({{"PATH", "/bin"}, {name, "x"}})) << name;
}

}  // namespace
}  // namespace sandcastle::service
