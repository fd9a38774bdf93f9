#pragma once
// A hash that stays the same across runs, builds and machines: names cached results and saved search state.
#include <string>
#include <string_view>

namespace memsim {

// FNV-1a 64 of the bytes, as 16 hex digits.
std::string stable_hash(std::string_view bytes);

} // namespace memsim
