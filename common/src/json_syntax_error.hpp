#pragma once
// Locating what simdjson refused: simdjson reports no position, so the rare failing document is read again.
#include <cstddef>
#include <string>
#include <string_view>

namespace memsim::fast_json::detail {

// Throws InputError("source: byte N", "invalid JSON: ..."): nlohmann's message where nlohmann refuses the text
// too (the messages json_io gives), else the first place past simdjson's limits (nesting deeper than
// `max_depth`, an integer beyond 64 bits).
[[noreturn]] void throw_syntax_error(std::string_view text, const std::string& source, const char* simdjson_message,
                                     std::size_t max_depth);

} // namespace memsim::fast_json::detail
