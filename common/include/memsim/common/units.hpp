#pragma once
// Strict unit strings: sizes ("16GiB", "1000000", "1.5GB"), bandwidths ("25GB/s"), durations ("2us"),
// rates ("10e12"). GB = 1e9, GiB = 2^30; bare numbers are bytes / bytes per second / seconds.
#include <cstdint>
#include <string>
#include <string_view>

namespace memsim::units {

// Each throws std::invalid_argument with a message naming the bad text and the accepted forms.
std::uint64_t parse_bytes(std::string_view text);
double parse_bandwidth(std::string_view text); // bytes per second
double parse_duration(std::string_view text);  // seconds
double parse_number(std::string_view text);    // plain number, e.g. "10e12" or "1.5"

// Human-readable forms for tables (not round-trippable).
std::string format_bytes(double bytes);
std::string format_duration(double seconds);

} // namespace memsim::units
