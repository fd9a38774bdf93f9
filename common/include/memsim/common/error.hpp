#pragma once
// Errors that carry where the bad input is, so every command can print `file:line:col: what`.
#include <stdexcept>
#include <string>

namespace memsim {

// Bad input from a user document or command line. `where` is already formatted:
// "file.yaml:12:3", "plan.json: at /steps/4/deps/0", "plan.json: byte 118", or "--budget".
class InputError : public std::runtime_error {
public:
  InputError(std::string where, const std::string& what)
      : std::runtime_error(where.empty() ? what : where + ": " + what), where_(std::move(where)), what_(what)
  {
  }
  const std::string& where() const { return where_; }
  const std::string& message() const { return what_; }

private:
  std::string where_;
  std::string what_;
};

// A request that is well-formed but cannot be satisfied (a budget no plan fits, a trace with no chain view).
class Infeasible : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace memsim
