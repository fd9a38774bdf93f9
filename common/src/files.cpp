#include "memsim/common/files.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/huge_pages.hpp"

#include <fstream>

namespace memsim {

std::string read_text_file(const std::filesystem::path& path)
{
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw InputError(path.string(), "cannot open file");
  const std::streamoff size = in.tellg();
  if (size < 0)
    throw InputError(path.string(), "cannot read file");
  // Sized once: fresh pages are costly, and a growing buffer touches about three times the file's size.
  std::string text;
  text.reserve(static_cast<std::size_t>(size) + kReadSlack);
  advise_huge_pages(text.data(), text.capacity());
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
