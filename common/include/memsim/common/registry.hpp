#pragma once
// One registry for every kind of pluggable component (planners, memory policies, trace generators, importers).
// An entry is a Component: a name, a description, typed parameters (params.hpp) and the callable that does the
// work, whose signature is the kind's own. Components register statically, one line next to their code; a second
// registration of a name is a programming error that stops the program at start-up, naming both places.
#include "memsim/common/error.hpp"
#include "memsim/common/params.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace memsim {

// Where a registration is written. std::source_location would do, but libstdc++'s needs a builtin that clang 14
// lacks; __builtin_FILE and __builtin_LINE in default arguments give the caller's place in g++ and clang alike.
class SourcePlace {
public:
  static constexpr SourcePlace current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
  {
    return SourcePlace(file, line);
  }
  constexpr const char* file_name() const { return file_; }
  constexpr unsigned line() const { return line_; }

private:
  constexpr SourcePlace(const char* file, unsigned line) : file_(file), line_(line) {}
  const char* file_;
  unsigned line_;
};

template <class Callable>
struct Component {
  std::string name;
  std::string description;
  std::vector<ParamSpec> params;
  Callable make;
};

class DuplicateRegistration : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

template <class Entry>
class Registry {
public:
  // `kind` names entries in messages: "unknown planner 'x' (valid: ...)".
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  const std::string& kind() const { return kind_; }

  // Throws DuplicateRegistration naming both registrations when the name is taken.
  void add(Entry entry, SourcePlace where = SourcePlace::current())
  {
    const std::string here = fmt::format("{}:{}", where.file_name(), where.line());
    auto found = entries_.find(entry.name);
    if (found != entries_.end())
      throw DuplicateRegistration(fmt::format("{} '{}' is registered twice: at {} and at {}", kind_, entry.name,
                                              found->second.where, here));
    std::string name = entry.name;
    entries_.emplace(std::move(name), Registered{std::move(entry), here});
  }

  const Entry* find(std::string_view name) const
  {
    auto found = entries_.find(name);
    return found == entries_.end() ? nullptr : &found->second.entry;
  }

  // Throws InputError listing the valid names.
  const Entry& get(std::string_view name) const
  {
    if (const Entry* entry = find(name))
      return *entry;
    throw InputError("", fmt::format("unknown {} '{}' (valid: {})", kind_, name, names()));
  }

  std::vector<const Entry*> all() const // sorted by name
  {
    std::vector<const Entry*> result;
    for (const auto& [name, registered] : entries_)
      result.push_back(&registered.entry);
    return result;
  }

  std::string names() const // "a, b, c", or "none"
  {
    std::string joined;
    for (const auto& [name, registered] : entries_)
      joined += (joined.empty() ? "" : ", ") + name;
    return joined.empty() ? "none" : joined;
  }

  // Checks names, types and ranges of `given` against the entry's parameters; fills defaults.
  ParamValues complete_params(const Entry& entry, const nlohmann::json& given) const
  {
    return memsim::complete_params(kind_, entry.name, entry.params, given);
  }

  // "k=v" assignments as JSON of the declared types (not yet completed).
  nlohmann::json parse_assignments(const Entry& entry, const std::vector<std::string>& assignments,
                                   const std::string& where = "--param") const
  {
    return parse_param_assignments(kind_, entry.name, entry.params, assignments, where);
  }

private:
  struct Registered {
    Entry entry;
    std::string where; // file:line of the registration
  };
  std::string kind_;
  std::map<std::string, Registered, std::less<>> entries_;
};

// A static registration: a duplicate name is a bug, so it stops the program before main with the message.
template <class Entry>
bool register_or_abort(Registry<Entry>& registry, Entry entry,
                       SourcePlace where = SourcePlace::current())
{
  try {
    registry.add(std::move(entry), where);
  } catch (const DuplicateRegistration& error) {
    std::fprintf(stderr, "memsim: %s\n", error.what());
    std::abort();
  }
  return true;
}

} // namespace memsim
