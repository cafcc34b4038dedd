#include "trace/json_scanner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tracetorch::json_internal {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The edits ScanJson finds, applied; "ERROR: <message>" when it fails.
std::string Rewrite(std::string_view text) {
  absl::StatusOr<std::vector<JsonEdit>> edits = ScanJson(text);
  if (!edits.ok()) return "ERROR: " + std::string(edits.status().message());
  return ApplyEdits(text, *edits);
}

// The error message for `text`, which must be rejected with InvalidArgument.
std::string ErrorOf(std::string_view text) {
  absl::StatusOr<std::vector<JsonEdit>> edits = ScanJson(text);
  if (edits.ok()) return "(accepted)";
  EXPECT_EQ(edits.status().code(), absl::StatusCode::kInvalidArgument) << edits.status();
  return std::string(edits.status().message());
}

TEST(JsonScanner, AcceptsEveryStandardTokenWithoutEdits) {
  const std::string_view text =
      R"({"s": "x", "t": true, "f": false, "n": null, "i": -12, "u": 18446744073709551615,)"
      R"( "d": 1.5e-3, "z": 0, "e": [], "o": {}, "a": [1, [2, {"b": [3]}]]})";
  absl::StatusOr<std::vector<JsonEdit>> edits = ScanJson(text);
  ASSERT_TRUE(edits.ok()) << edits.status();
  EXPECT_THAT(*edits, IsEmpty());
}

TEST(JsonScanner, AcceptsAnyScalarAsTheDocument) {
  for (std::string_view text : {"true", " false ", "null", "\"s\"", "-0.5", "\t7\r\n"}) {
    absl::StatusOr<std::vector<JsonEdit>> edits = ScanJson(text);
    ASSERT_TRUE(edits.ok()) << text << ": " << edits.status();
    EXPECT_THAT(*edits, IsEmpty()) << text;
  }
}

TEST(JsonScanner, RewritesPythonNonFiniteTokensToSentinels) {
  const std::string_view text = "[NaN, Infinity, -Infinity]";
  absl::StatusOr<std::vector<JsonEdit>> edits = ScanJson(text);
  ASSERT_TRUE(edits.ok()) << edits.status();
  ASSERT_EQ(edits->size(), 3u);
  EXPECT_EQ((*edits)[0].offset, 1u);
  EXPECT_EQ((*edits)[0].length, 3u);
  EXPECT_EQ((*edits)[0].replacement, kNanSentinel);
  EXPECT_EQ((*edits)[1].offset, 6u);
  EXPECT_EQ((*edits)[1].length, 8u);
  EXPECT_EQ((*edits)[1].replacement, kInfSentinel);
  EXPECT_EQ((*edits)[2].offset, 16u);
  EXPECT_EQ((*edits)[2].length, 9u);
  EXPECT_EQ((*edits)[2].replacement, kNegInfSentinel);
  EXPECT_EQ(ApplyEdits(text, *edits), R"(["\u0000NaN", "\u0000Infinity", "\u0000-Infinity"])");
}

TEST(JsonScanner, RewritesTokensAsObjectValuesAndNestedDeep) {
  EXPECT_EQ(Rewrite(R"({"a": NaN, "b": {"c": [1, -Infinity]}})"),
            R"({"a": "\u0000NaN", "b": {"c": [1, "\u0000-Infinity"]}})");
  EXPECT_EQ(Rewrite("NaN"), kNanSentinel);
}

TEST(JsonScanner, LeavesNanInsideStringsAlone) {
  // Strings that spell the tokens, with escapes around or inside them, and keys named like them.
  const std::string_view text =
      R"({"NaN": "NaN", "q": "\"NaN\"", "b": "a\\NaN", "u": "\u004eaN", "i": "-Infinity\\",)"
      R"( "Infinity": ["x NaN y", "\\\"Infinity"]})";
  absl::StatusOr<std::vector<JsonEdit>> edits = ScanJson(text);
  ASSERT_TRUE(edits.ok()) << edits.status();
  EXPECT_THAT(*edits, IsEmpty());
}

TEST(JsonScanner, RewritesTheTokenRightAfterAStringEndingInAnEscapedBackslash) {
  EXPECT_EQ(Rewrite(R"(["a\\", NaN])"), R"(["a\\", "\u0000NaN"])");
}

TEST(JsonScanner, RejectsMisspelledAndLowercaseTokens) {
  EXPECT_EQ(ErrorOf("[nan]"), "line 1, column 2: unexpected character 'n'");
  EXPECT_EQ(ErrorOf("[inf]"), "line 1, column 2: unexpected character 'i'");
  EXPECT_EQ(ErrorOf("[-inf]"), "line 1, column 3: invalid number: expected a digit");
  EXPECT_EQ(ErrorOf("[+1]"), "line 1, column 2: unexpected character '+'");
  EXPECT_EQ(ErrorOf("[NaNa]"), "line 1, column 5: expected ',' or ']'");
}

TEST(JsonScanner, RewritesNumbersBeyondWhatSimdjsonHolds) {
  EXPECT_EQ(Rewrite("[18446744073709551616]"), "[1.8446744073709552e+19]");
  EXPECT_EQ(Rewrite("[-9223372036854775809]"), "[-9.223372036854776e+18]");
  EXPECT_EQ(Rewrite("[1e400, -1e400]"), R"(["\u0000Infinity", "\u0000-Infinity"])");
  // In range, or merely underflowing to zero: left alone.
  EXPECT_EQ(Rewrite("[18446744073709551615, -9223372036854775808, 1e-400]"),
            "[18446744073709551615, -9223372036854775808, 1e-400]");
}

TEST(JsonScanner, RejectsMalformedNumbers) {
  EXPECT_EQ(ErrorOf("[01]"), "line 1, column 3: invalid number: leading zero");
  EXPECT_EQ(ErrorOf("[1.]"), "line 1, column 4: invalid number: expected a digit after '.'");
  EXPECT_EQ(ErrorOf("[1e+]"), "line 1, column 5: invalid number: expected a digit in the exponent");
  EXPECT_EQ(ErrorOf("[-]"), "line 1, column 3: invalid number: expected a digit");
  EXPECT_EQ(ErrorOf("[.5]"), "line 1, column 2: unexpected character '.'");
}

TEST(JsonScanner, ReplacesLoneSurrogatesAndKeepsPairs) {
  EXPECT_EQ(Rewrite(R"(["a\ud800b", "\udc00", "\uD83D"])"), R"(["a\ufffdb", "\ufffd", "\ufffd"])");
  // A high surrogate followed by a non-surrogate escape: only the lone one is replaced.
  EXPECT_EQ(Rewrite(R"(["\ud800\u0041"])"), R"(["\ufffd\u0041"])");
  // A proper pair (U+1F600) is left alone.
  EXPECT_EQ(Rewrite(R"(["\ud83d\ude00"])"), R"(["\ud83d\ude00"])");
}

TEST(JsonScanner, RejectsBadEscapesAndControlCharacters) {
  EXPECT_EQ(ErrorOf(R"(["\x"])"), "line 1, column 3: invalid escape sequence in string");
  EXPECT_EQ(ErrorOf(R"(["\u12G4"])"),
            "line 1, column 3: invalid \\u escape: expected 4 hex digits");
  EXPECT_EQ(ErrorOf(R"(["\u12"])"), "line 1, column 3: invalid \\u escape: expected 4 hex digits");
  EXPECT_EQ(ErrorOf(std::string_view("[\"a\0\"]", 5)),
            "line 1, column 4: unescaped control character in string");
  EXPECT_EQ(ErrorOf("[\"a\tb\"]"), "line 1, column 4: unescaped control character in string");
  EXPECT_EQ(ErrorOf(std::string_view("[\"\\\0\"]", 6)),
            "line 1, column 3: invalid escape sequence in string");
}

TEST(JsonScanner, AcceptsValidUtf8InStrings) {
  // 2-, 3- and 4-byte sequences, including the largest code point.
  absl::StatusOr<std::vector<JsonEdit>> edits =
      ScanJson("[\"\xc3\xa9\", \"\xe2\x82\xac\", \"\xf0\x9f\x98\x80\", \"\xf4\x8f\xbf\xbf\"]");
  ASSERT_TRUE(edits.ok()) << edits.status();
  EXPECT_THAT(*edits, IsEmpty());
}

TEST(JsonScanner, RejectsInvalidUtf8InStrings) {
  const std::string kProblem = ": invalid UTF-8 in string";
  EXPECT_EQ(ErrorOf("[\"ab\xff\"]"), "line 1, column 5" + kProblem);        // Not a lead byte.
  EXPECT_EQ(ErrorOf("[\"\x80\"]"), "line 1, column 3" + kProblem);          // Lone continuation.
  EXPECT_EQ(ErrorOf("[\"\xc0\xaf\"]"), "line 1, column 3" + kProblem);      // Overlong '/'.
  EXPECT_EQ(ErrorOf("[\"\xe0\x80\xaf\"]"), "line 1, column 3" + kProblem);  // Overlong, 3 bytes.
  EXPECT_EQ(ErrorOf("[\"\xed\xa0\x80\"]"), "line 1, column 3" + kProblem);  // Encoded surrogate.
  EXPECT_EQ(ErrorOf("[\"\xf4\x90\x80\x80\"]"), "line 1, column 3" + kProblem);  // > U+10FFFF.
  EXPECT_EQ(ErrorOf("[\"\xe2\x82\"]"), "line 1, column 3" + kProblem);          // Cut short.
  EXPECT_EQ(ErrorOf("[\"\xe2\x82"), "line 1, column 3" + kProblem);             // Cut at the end.
}

TEST(JsonScanner, RejectsNonAsciiOutsideStrings) {
  EXPECT_EQ(ErrorOf("[\xff]"), "line 1, column 2: unexpected byte 0xff");
  EXPECT_EQ(ErrorOf("[\x01]"), "line 1, column 2: unexpected byte 0x01");
}

TEST(JsonScanner, ErrorsNameLineAndColumnCountingCharacters) {
  EXPECT_EQ(ErrorOf("{\n  \"a\": [1, 2,, 3]\n}"), "line 2, column 14: unexpected character ','");
  // "é" and "😀" are one column each, however many bytes they take.
  EXPECT_EQ(ErrorOf("{\"\xc3\xa9\xf0\x9f\x98\x80\": 1 2}"),
            "line 1, column 10: expected ',' or '}'");
  EXPECT_EQ(ErrorOf("\r\n\n  [1 2]"), "line 3, column 6: expected ',' or ']'");
}

TEST(JsonScanner, RejectsStructuralErrors) {
  EXPECT_EQ(ErrorOf("{1: 2}"), "line 1, column 2: expected a string key in double quotes");
  EXPECT_EQ(ErrorOf("{\"a\" 2}"), "line 1, column 6: expected ':' after an object key");
  EXPECT_EQ(ErrorOf("{\"a\": 1]"), "line 1, column 8: expected ',' or '}'");
  EXPECT_EQ(ErrorOf("[1}"), "line 1, column 3: expected ',' or ']'");
  EXPECT_EQ(ErrorOf("[1,]"), "line 1, column 4: unexpected character ']'");
  EXPECT_EQ(ErrorOf("{\"a\": 1,}"), "line 1, column 9: expected a string key in double quotes");
  EXPECT_EQ(ErrorOf("{} []"), "line 1, column 4: unexpected content after the end of the document");
  EXPECT_EQ(ErrorOf("NaN NaN"),
            "line 1, column 5: unexpected content after the end of the document");
}

TEST(JsonScanner, EmptyAndWhitespaceOnlyInputIsAnEndOfInput) {
  EXPECT_EQ(ErrorOf(""), "line 1, column 1: unexpected end of input");
  EXPECT_EQ(ErrorOf(" \n\t"), "line 2, column 2: unexpected end of input");
}

TEST(JsonScanner, EveryTruncationOfADocumentIsAnError) {
  const std::string text =
      "{\"name\": \"a\\\"b\\u00e9\xc3\xa9\", \"v\": [NaN, -Infinity, Infinity, 1.5e+3, -0, "
      "true, false, null, {}, []], \"k\": {\"x\": 18446744073709551616}}";
  ASSERT_TRUE(ScanJson(text).ok()) << ScanJson(text).status();
  for (size_t n = 0; n < text.size(); ++n) {
    absl::StatusOr<std::vector<JsonEdit>> edits = ScanJson(std::string_view(text).substr(0, n));
    ASSERT_FALSE(edits.ok()) << "accepted the first " << n << " bytes";
    EXPECT_EQ(edits.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(edits.status().message(), HasSubstr("line 1, column "));
  }
  EXPECT_EQ(ErrorOf("{\"a\": [1, 2"), "line 1, column 12: unexpected end of input");
  EXPECT_EQ(ErrorOf("{\"a\": \"xy"), "line 1, column 7: unterminated string");
  EXPECT_EQ(ErrorOf("[\"x\\"), "line 1, column 2: unterminated string");
}

TEST(JsonScanner, NestingUpToTheLimitIsAccepted) {
  const std::string deepest =
      std::string(kMaxJsonDepth, '[') + "NaN" + std::string(kMaxJsonDepth, ']');
  absl::StatusOr<std::vector<JsonEdit>> edits = ScanJson(deepest);
  ASSERT_TRUE(edits.ok()) << edits.status();
  EXPECT_EQ(edits->size(), 1u);

  const std::string too_deep = "[" + deepest + "]";
  EXPECT_EQ(ErrorOf(too_deep),
            "line 1, column " + std::to_string(kMaxJsonDepth + 1) + ": nesting too deep");
  std::string objects;
  for (int i = 0; i <= kMaxJsonDepth; ++i) objects += "{\"a\":";
  EXPECT_THAT(ErrorOf(objects), HasSubstr("nesting too deep"));
}

TEST(JsonScanner, EmptyContainersNeedNoContent) {
  EXPECT_EQ(Rewrite("{ }"), "{ }");
  EXPECT_EQ(Rewrite("[ \n ]"), "[ \n ]");
  EXPECT_EQ(Rewrite("{\"a\": {}, \"b\": [[], {}]}"), "{\"a\": {}, \"b\": [[], {}]}");
}

TEST(JsonScanner, ApplyEditsReservesThePadding) {
  const std::string_view text = "[NaN]";
  absl::StatusOr<std::vector<JsonEdit>> edits = ScanJson(text);
  ASSERT_TRUE(edits.ok());
  const std::string fixed = ApplyEdits(text, *edits, /*padding=*/64);
  EXPECT_EQ(fixed, "[\"\\u0000NaN\"]");
  EXPECT_GE(fixed.capacity() - fixed.size(), 64u);
  EXPECT_EQ(ApplyEdits(text, {}), text);
}

TEST(JsonScanner, DecodeSentinelKnowsExactlyTheThreeSentinels) {
  double v = 0;
  ASSERT_TRUE(DecodeSentinel(std::string_view("\0NaN", 4), &v));
  EXPECT_TRUE(std::isnan(v));
  ASSERT_TRUE(DecodeSentinel(std::string_view("\0Infinity", 9), &v));
  EXPECT_EQ(v, HUGE_VAL);
  ASSERT_TRUE(DecodeSentinel(std::string_view("\0-Infinity", 10), &v));
  EXPECT_EQ(v, -HUGE_VAL);
  v = 7;
  for (std::string_view s :
       {std::string_view("NaN"), std::string_view("\0nan", 4), std::string_view("\0NaN ", 5),
        std::string_view("\0", 1), std::string_view()}) {
    EXPECT_FALSE(DecodeSentinel(s, &v)) << s;
  }
  EXPECT_EQ(v, 7);
}

}  // namespace
}  // namespace tracetorch::json_internal
