#include "memsim/common/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>

namespace memsim {

void advise_huge_pages(const void* data, std::size_t bytes)
{
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  if (data == nullptr || bytes < 2 * kHugePage)
    return;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t last = (begin + bytes) & ~(kHugePage - 1);
  if (last > first) // a refusal (no THP in this kernel) only means ordinary pages
    (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

} // namespace memsim
