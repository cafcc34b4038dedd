// Number formatting for people, shared by the CLI and the agents' text summaries.
#ifndef TRACETORCH_TRACE_FORMAT_H_
#define TRACETORCH_TRACE_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tracetorch {

// 650 -> "650", 2112 -> "2.1K", 768000 -> "768.0K", 1800000 -> "1.8M", 3e9 -> "3.0B".
std::string FormatCount(int64_t n);
// Milliseconds, about three significant digits: 0.0346 -> "0.035ms", 4.081 -> "4.08ms",
// 10.48 -> "10.5ms", 81.7 -> "81.7ms", 10545.3 -> "10545ms". Non-finite -> "n/a".
std::string FormatMs(double ms);
// {16, 64} -> "[16, 64]"; {} -> "[]".
std::string FormatShape(const std::vector<int64_t>& shape);
// Bytes, as tracetorch-ml: 512 -> "512B", 2048 -> "2.0KiB", signed ("-1.50MiB"), "3.00GiB".
std::string FormatBytes(int64_t bytes);
// A relative change as a signed percentage: 0.3444 -> "+34.4%", -0.772 -> "-77.2%".
std::string FormatPercent(double relative);
// Fixed decimals; non-finite values print as "nan", "inf", "-inf".
std::string FormatFixed(double value, int decimals);

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_FORMAT_H_
