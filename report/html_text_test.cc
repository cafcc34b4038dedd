#include "report/html_text.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/assets.h"

namespace tracetorch::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(EscapeHtml, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(EscapeHtml(R"(<a href="x" title='y'>&</a>)"),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;");
  EXPECT_EQ(EscapeHtml("plain"), "plain");
}

TEST(EscapeScriptJson, NoScriptEndOrCommentCanSurvive) {
  const std::string out = EscapeScriptJson(R"({"name":"</script><!--&"})");
  EXPECT_EQ(out, R"({"name":"\u003c/script\u003e\u003c!--\u0026"})");
}

TEST(HtmlPage, InlinesEverythingAndForbidsTheNetwork) {
  const std::string page = HtmlPage("<Net>", R"({"kind":"trace"})");
  EXPECT_THAT(page, HasSubstr("<title>&lt;Net&gt;</title>"));
  EXPECT_THAT(page, HasSubstr("Content-Security-Policy"));
  EXPECT_THAT(page, HasSubstr("default-src 'none'"));
  EXPECT_THAT(page, HasSubstr(std::string(ChartJs().substr(0, 200))));
  EXPECT_THAT(page, HasSubstr(std::string(ReportJs().substr(0, 200))));
  EXPECT_THAT(page, HasSubstr(std::string(ReportCss().substr(0, 200))));
  // Nothing is fetched: no external script, style sheet or image.
  EXPECT_THAT(page, Not(HasSubstr("<script src")));
  EXPECT_THAT(page, Not(HasSubstr("<link")));
}

TEST(Assets, ChartJsIsTheDebianBuild) {
  EXPECT_THAT(std::string(ChartJs().substr(0, 100)), HasSubstr("Chart.js v3."));
  EXPECT_GT(ChartJs().size(), 100000u);
}

}  // namespace
}  // namespace tracetorch::report
