// Shell quoting (support/shell.h): any string survives /bin/sh as one word.
#include <gtest/gtest.h>
#include <stdio.h>

#include <string>

#include "support/shell.h"

namespace {

using svattn::support::shell_quote;

std::string echo_through_sh(const std::string& s) {
  const std::string cmd = "printf '%s' " + shell_quote(s);
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[256];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(SupportShell, QuotedWordsSurviveTheShell) {
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  for (const std::string s : {"", "plain", "two words", "it's", "$HOME `x` \"q\" \\ ; | &", "'"})
    EXPECT_EQ(echo_through_sh(s), s) << s;
}

}  // namespace
