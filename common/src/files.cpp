#include "memsim/common/files.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/huge_pages.hpp"

#include <fstream>

namespace memsim {

namespace {
constexpr std::size_t kRecycledAbove = std::size_t{4} << 20; // smaller texts are cheap to allocate
thread_local std::string spare_text;
} // namespace

void recycle_text(std::string&& text)
{
  if (text.capacity() >= kRecycledAbove && text.capacity() > spare_text.capacity())
    spare_text = std::move(text);
}

std::string text_buffer(std::size_t capacity)
{
  std::string text;
  if (capacity >= kRecycledAbove && spare_text.capacity() >= capacity) {
    text = std::move(spare_text);
    spare_text = std::string();
    text.clear();
    return text;
  }
  text.reserve(capacity >= kRecycledAbove ? capacity + capacity / 2 : capacity);
  advise_huge_pages(text.data(), text.capacity());
  return text;
}

std::string read_text_file(const std::filesystem::path& path)
{
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw InputError(path.string(), "cannot open file");
  const std::streamoff size = in.tellg();
  if (size < 0)
    throw InputError(path.string(), "cannot read file");
  // Sized once: fresh pages are costly, and a growing buffer touches about three times the file's size.
  std::string text = text_buffer(static_cast<std::size_t>(size) + kReadSlack);
  text.resize(static_cast<std::size_t>(size));
  in.seekg(0);
  if (!in.read(text.data(), size))
    throw InputError(path.string(), "cannot read file");
  return text;
}

void write_text_file(const std::filesystem::path& path, std::string_view text)
{
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    throw InputError(path.string(), "cannot write file");
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out.flush())
    throw InputError(path.string(), "write failed");
}

} // namespace memsim
