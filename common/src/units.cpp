#include "memsim/common/units.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace memsim::units {
namespace {

struct Suffix {
  std::string_view text;
  double factor;
};

// Splits "16GiB" into 16 and "GiB". The number must be a complete, finite, non-negative literal.
std::pair<double, std::string_view> split_number(std::string_view text, std::string_view what)
{
  while (!text.empty() && text.front() == ' ')
    text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ')
    text.remove_suffix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data())
    throw std::invalid_argument(fmt::format("'{}' is not a {}: it must start with a number", text, what));
  if (!std::isfinite(value) || std::signbit(value)) // "-0" is negative too
    throw std::invalid_argument(fmt::format("'{}' is not a {}: it must be finite and not negative", text, what));
  std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  while (!suffix.empty() && suffix.front() == ' ')
    suffix.remove_prefix(1);
  return {value, suffix};
}

template <std::size_t N>
double apply_suffix(std::string_view text, std::string_view what, const std::array<Suffix, N>& suffixes,
                    std::string_view accepted)
{
  auto [value, suffix] = split_number(text, what);
  for (const auto& candidate : suffixes)
    if (candidate.text == suffix)
      return value * candidate.factor;
  throw std::invalid_argument(fmt::format("'{}' is not a {}: unknown unit '{}' (accepted: {})", text, what, suffix,
                                          accepted));
}

constexpr double kKiB = 1024.0;
// clang-format 14 takes `kKiB * kKiB` in this table for a declaration and writes `kKiB* kKiB`.
// clang-format off
constexpr std::array<Suffix, 10> kByteSuffixes{{{"", 1},
                                                {"B", 1},
                                                {"KB", 1e3},
                                                {"MB", 1e6},
                                                {"GB", 1e9},
                                                {"TB", 1e12},
                                                {"KiB", kKiB},
                                                {"MiB", kKiB * kKiB},
                                                {"GiB", kKiB * kKiB * kKiB},
                                                {"TiB", kKiB * kKiB * kKiB * kKiB}}};
// clang-format on

} // namespace

std::uint64_t parse_bytes(std::string_view text)
{
  double bytes = apply_suffix(text, "size", kByteSuffixes, "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; e.g. 16GiB");
  if (bytes > 1.8e19)
    throw std::invalid_argument(fmt::format("'{}' is too large a size", text));
  double rounded = std::round(bytes);
  if (std::fabs(rounded - bytes) > 1e-6 * std::max(1.0, bytes))
    throw std::invalid_argument(fmt::format("'{}' is not a whole number of bytes", text));
  return static_cast<std::uint64_t>(rounded);
}

double parse_bandwidth(std::string_view text)
{
  static constexpr std::array<Suffix, 10> suffixes{{{"", 1},
                                                    {"B/s", 1},
                                                    {"KB/s", 1e3},
                                                    {"MB/s", 1e6},
                                                    {"GB/s", 1e9},
                                                    {"TB/s", 1e12},
                                                    {"KiB/s", kKiB},
                                                    {"MiB/s", kKiB * kKiB},
                                                    {"GiB/s", kKiB * kKiB * kKiB},
                                                    {"TiB/s", kKiB * kKiB * kKiB * kKiB}}};
  double value = apply_suffix(text, "bandwidth", suffixes, "B/s, KB/s, MB/s, GB/s, TB/s, GiB/s, ...; e.g. 25GB/s");
  if (value <= 0)
    throw std::invalid_argument(fmt::format("'{}' is not a bandwidth: it must be positive", text));
  return value;
}

double parse_duration(std::string_view text)
{
  static constexpr std::array<Suffix, 6> suffixes{
      {{"", 1}, {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"min", 60}}};
  const double seconds = apply_suffix(text, "duration", suffixes, "s, ms, us, ns, min; e.g. 2us");
  if (seconds > 1e9) // the limit on simulated times (README, Limits)
    throw std::invalid_argument(fmt::format("'{}' is too long a duration (at most 1e9 s)", text));
  return seconds;
}

double parse_number(std::string_view text)
{
  static constexpr std::array<Suffix, 1> suffixes{{{"", 1}}};
  return apply_suffix(text, "number", suffixes, "a plain number such as 10e12");
}

std::string format_bytes(double bytes)
{
  static constexpr std::array<std::string_view, 5> names{"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t unit = 0;
  while (bytes >= 1024.0 && unit + 1 < names.size()) {
    bytes /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f}B", bytes) : fmt::format("{:.2f}{}", bytes, names[unit]);
}

std::string format_duration(double seconds)
{
  if (seconds >= 1.0 || seconds == 0.0)
    return fmt::format("{:.3f}s", seconds);
  if (seconds >= 1e-3)
    return fmt::format("{:.3f}ms", seconds * 1e3);
  return fmt::format("{:.3f}us", seconds * 1e6);
}

} // namespace memsim::units
