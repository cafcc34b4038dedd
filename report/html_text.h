// The page around a report's data: escaping for HTML text and for JSON inside a <script> element,
// and the page itself (report/html_report.h says what it holds).
//
// Thread-safe: pure functions.
#ifndef TRACETORCH_REPORT_HTML_TEXT_H_
#define TRACETORCH_REPORT_HTML_TEXT_H_

#include <string>
#include <string_view>

namespace tracetorch::report {

// `text` as HTML text or a quoted attribute value: & < > " ' become entities.
std::string EscapeHtml(std::string_view text);

// JSON text made safe inside <script type="application/json">: every '<', '>' and '&' becomes
// \u003c, \u003e, \u0026 (they can only occur inside JSON strings, where the escapes mean the same
// characters), so no "</script" or "<!--" can end the element early. REQUIRES: `json` is valid
// JSON written by trace/json_writer.h (ASCII only).
std::string EscapeScriptJson(std::string_view json);

// The whole page: the Content-Security-Policy (no network: only inline script and style, and
// images from data: and blob: URLs), the inlined styles, Chart.js, the data and the page's script.
std::string HtmlPage(std::string_view title, std::string_view data_json);

}  // namespace tracetorch::report

#endif  // TRACETORCH_REPORT_HTML_TEXT_H_
