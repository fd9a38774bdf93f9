#include "memsim/common/stable_hash.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace memsim {

std::string stable_hash(std::string_view bytes)
{
  std::uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", hash);
}

} // namespace memsim
