#include "memsim/common/files.hpp"

#include "memsim/common/error.hpp"

#include <fstream>
#include <sstream>

namespace memsim {

std::string read_text_file(const std::filesystem::path& path)
{
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path.string(), "cannot open file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
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
