#include "run_app.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>

namespace memsim::cli {
namespace {

// The last word of a failing run must not fail itself: fmt::print throws when stderr cannot be written (a worker
// whose log is on a full disk), which here would end in std::terminate instead of the exit code.
void print_error(const std::string& message) { std::fputs(message.c_str(), stderr); }

} // namespace

std::filesystem::path own_executable()
{
  std::error_code ignored;
  return std::filesystem::read_symlink("/proc/self/exe", ignored);
}

int run_app(CLI::App& app, const Context& context, int argc, char** argv)
{
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : 2;
  } catch (const InputError& error) {
    print_error(fmt::format("memsim: {}\n", error.what()));
    return 2;
  } catch (const Infeasible& error) {
    print_error(fmt::format("memsim: infeasible: {}\n", error.what()));
    return 1;
  } catch (const std::exception& error) {
    print_error(fmt::format("memsim: internal error: {}\n", error.what()));
    return 3;
  }
  return context.exit_code;
}

} // namespace memsim::cli
