#include "report/html_text.h"

#include "report/assets.h"

namespace tracetorch::report {

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string EscapeScriptJson(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 16);
  for (char c : json) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string HtmlPage(std::string_view title, std::string_view data_json) {
  const std::string data = EscapeScriptJson(data_json);
  const std::string escaped_title = EscapeHtml(title);
  std::string page;
  page.reserve(data.size() + ChartJs().size() + ReportJs().size() + ReportCss().size() + 2048);
  // Pieces in order; std::string_view throughout (absl's string_view is not std's here).
  for (std::string_view piece :
       {std::string_view("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src "
                         "'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src "
                         "data: blob:\">\n<meta name=\"viewport\" content=\"width=device-width, "
                         "initial-scale=1\">\n<meta name=\"generator\" content=\"tracetorch\">\n"
                         "<title>"),
        std::string_view(escaped_title), std::string_view("</title>\n<style>\n"), ReportCss(),
        std::string_view("</style>\n</head>\n<body>\n<header class=\"top\"><h1 id=\"tt-title\">"),
        std::string_view(escaped_title),
        std::string_view(
            "</h1><div class=\"sub\" id=\"tt-sub\"></div></header>\n"
            "<main id=\"tt-main\"><noscript>This report needs JavaScript to draw its "
            "tables and charts.</noscript></main>\n<footer id=\"tt-footer\"></footer>\n"
            "<script id=\"tt-data\" type=\"application/json\">"),
        std::string_view(data), std::string_view("</script>\n<script>\n"), ChartJs(),
        std::string_view("\n</script>\n<script>\n"), ReportJs(),
        std::string_view("\n</script>\n</body>\n</html>\n")}) {
    page.append(piece);
  }
  return page;
}

}  // namespace tracetorch::report
