#include "memsim/traces/compressed_file.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <memory>

namespace memsim {
namespace {

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

bool ends_with_gz(const std::filesystem::path& path) { return path.extension() == ".gz"; }

// The plain text's size: the file's own, or for gzip (magic 1f 8b) the trailer's ISIZE.
std::size_t expected_size(const std::filesystem::path& path)
{
  std::error_code error;
  const std::uintmax_t file_size = std::filesystem::file_size(path, error);
  if (error)
    return 0;
  std::ifstream in(path, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  if (!in || magic[0] != 0x1f || magic[1] != 0x8b || file_size < 18)
    return static_cast<std::size_t>(file_size);
  unsigned char trailer[4] = {0, 0, 0, 0};
  in.seekg(static_cast<std::streamoff>(file_size - 4));
  in.read(reinterpret_cast<char*>(trailer), 4);
  const std::size_t plain = std::size_t{trailer[0]} | std::size_t{trailer[1]} << 8 | std::size_t{trailer[2]} << 16 |
                            std::size_t{trailer[3]} << 24;
  // A corrupt trailer must not reserve gigabytes: trust it up to a generous ratio.
  return in ? std::min<std::size_t>(plain, static_cast<std::size_t>(file_size) * 64) : 0;
}

} // namespace

std::string read_possibly_gzipped(const std::filesystem::path& path)
{
  if (!std::filesystem::is_regular_file(path))
    throw InputError(path.string(), "cannot open file");
  GzHandle file(gzopen(path.c_str(), "rb"));
  if (!file)
    throw InputError(path.string(), "cannot open file");
  // Reserved once for the likely size (gzip's trailer holds the plain size mod 2^32): fresh pages are costly, and a
  // growing buffer touches about three times the text's size.
  std::string text = text_buffer(expected_size(path) + kReadSlack);
  char buffer[1 << 16];
  for (;;) {
    int count = gzread(file.get(), buffer, sizeof buffer);
    if (count < 0) {
      int code = 0;
      const char* message = gzerror(file.get(), &code);
      throw InputError(path.string(), fmt::format("corrupt gzip data after {} decompressed bytes: {}", text.size(),
                                                  message ? message : "unknown zlib error"));
    }
    if (count == 0)
      break;
    text.append(buffer, static_cast<std::size_t>(count));
  }
  // zlib reports a gzip stream cut short only through gzerror at the end.
  int code = Z_OK;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END)
    throw InputError(path.string(), fmt::format("corrupt gzip data after {} decompressed bytes: {}", text.size(),
                                                message ? message : "unknown zlib error"));
  if (text.capacity() - text.size() < kReadSlack)
    text.reserve(text.size() + kReadSlack);
  return text;
}

void write_possibly_gzipped(const std::filesystem::path& path, std::string_view text)
{
  if (path.has_parent_path())
    std::filesystem::create_directories(path.parent_path());
  if (!ends_with_gz(path)) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out)
      throw InputError(path.string(), "cannot write file");
    return;
  }
  // gzopen writes a minimal header (no file name, mtime 0), so the bytes depend on the text alone.
  GzHandle file(gzopen(path.c_str(), "wb9"));
  if (!file)
    throw InputError(path.string(), "cannot write file");
  std::size_t done = 0;
  while (done < text.size()) {
    const auto chunk = static_cast<unsigned>(std::min<std::size_t>(text.size() - done, 1u << 20));
    if (gzwrite(file.get(), text.data() + done, chunk) != static_cast<int>(chunk))
      throw InputError(path.string(), "write failed");
    done += chunk;
  }
  if (gzclose(file.release()) != Z_OK)
    throw InputError(path.string(), "write failed");
}

} // namespace memsim
