// The files the HTML report inlines, embedded in the binary at build time
// (report/embed_assets.cmake turns each into a generated source), so that `tracetorch` needs none
// of them at run time:
//   ChartJs()    Chart.js (MIT), the minified UMD build from Debian's libjs-chart.js
//   ReportJs()   report/assets/report.js, the page's script
//   ReportCss()  report/assets/report.css
// None contains "</script" or "</style" (the build checks), so each can be inlined as it is.
//
// Thread-safe: constant data.
#ifndef TRACETORCH_REPORT_ASSETS_H_
#define TRACETORCH_REPORT_ASSETS_H_

#include <string_view>

namespace tracetorch::report {

std::string_view ChartJs();
std::string_view ReportJs();
std::string_view ReportCss();

}  // namespace tracetorch::report

#endif  // TRACETORCH_REPORT_ASSETS_H_
