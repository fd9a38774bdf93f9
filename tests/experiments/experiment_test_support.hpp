#pragma once
// Shared helpers of the experiments tests: scratch folders, files, and running the memsim executable.
#include "test_files.hpp"

#include <filesystem>

namespace memsim::experiments::testing {

inline std::filesystem::path data_dir() { return std::filesystem::path(MEMSIM_TEST_DATA_DIR) / "data"; }

using memsim::test::CommandResult;
using memsim::test::lines_of;
using memsim::test::read_file;
using memsim::test::run_command;
using memsim::test::ScratchDir;
using memsim::test::write_file;

} // namespace memsim::experiments::testing
