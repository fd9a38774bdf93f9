#pragma once
// Large buffers that are filled once (a file's text, the JSON parser's tapes, tables with an entry per plan step):
// every fresh 4 KiB page costs a page fault, and on virtual machines a fault costs microseconds -- more than
// parsing the page's bytes. Asking for transparent huge pages on such a buffer before it is first written makes
// one fault per 2 MiB. Only a hint: where the kernel has no huge pages to give, nothing changes.
#include <cstddef>
#include <vector>

namespace memsim {

// Advises huge pages for the 2 MiB-aligned part of [data, data + bytes); does nothing for small buffers.
void advise_huge_pages(const void* data, std::size_t bytes);

// vector.reserve(count), with the storage advised before the elements are written (elements already there are
// moved to its start; the rest of it is untouched).
template <typename T>
void reserve_huge(std::vector<T>& vector, std::size_t count)
{
  if (count <= vector.capacity())
    return;
  vector.reserve(count);
  advise_huge_pages(vector.data(), vector.capacity() * sizeof(T));
}

} // namespace memsim
