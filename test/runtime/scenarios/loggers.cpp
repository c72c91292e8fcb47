// The multi-process runtime scenarios of one component (CSV and TensorBoard loggers, a logger class of the program's own writing rank 0's rows only);
// test/runtime/multiprocess_program.cpp dispatches to them by name.
#include <fabric/fabric.h>

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "scenarios/scenarios.h"
#include "scenarios/support.h"

namespace fabric_test {

int run_logging(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options()
                            .accelerator("cpu")
                            .devices(arguments.devices)
                            .logger(fabric::CSVLogger(arguments.dir, "csv"))
                            .logger(fabric::TensorBoardLogger(arguments.dir, "tb")));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = fabric.global_rank();
  for (int step = 0; step < 3; ++step) {
    fabric.log("loss", 1.5 + rank + step, step);
    fabric.log_dict({{"acc", 0.25 * (rank + 1) + step}, {"lr", 0.125}}, step);
  }
  fabric.log("loss", torch::tensor(9.0 + rank), 10);
  fabric.barrier("logged");
  return 0;
}

// A logger class of the program's own: its std::ofstream member is opened in
// its constructor, with no Fabric at hand.
class OwnCsvLogger {
 public:
  explicit OwnCsvLogger(const std::string& path) : out_(fabric::rank_zero_ofstream(path)) {
    out_ << "step,loss,rank\n";
  }
  void row(int step, double loss, int rank) { out_ << step << ',' << loss << ',' << rank << '\n'; }
  void close() { out_.close(); }

 private:
  std::ofstream out_;
};

// fabric::rank_zero_ofstream: a logger constructed before launch() and one
// after it; each file holds one header and one row per step, rank 0's.
int run_rank_zero_file(const Arguments& arguments) {
  check(!arguments.dir.empty(), "rank_zero_file needs --dir");
  std::error_code ignored;
  std::filesystem::create_directories(arguments.dir, ignored);
  const std::string before_path = arguments.dir + "/before_launch.csv";
  const std::string after_path = arguments.dir + "/after_launch.csv";
  OwnCsvLogger before(before_path);
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = this_rank;
  OwnCsvLogger after(after_path);
  constexpr int kSteps = 5;
  for (int step = 0; step < kSteps; ++step) {
    before.row(step, 1.5 + step + 100 * rank, rank);
    after.row(step, 2.5 + step + 100 * rank, rank);
  }
  before.close();
  after.close();
  fabric.barrier("logged");
  if (rank == 0) {
    for (const auto& [path, offset] : {std::make_pair(before_path, 1.5), std::make_pair(after_path, 2.5)}) {
      std::ifstream in(path);
      check(static_cast<bool>(in), "cannot read " + path);
      std::vector<std::string> lines;
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      check(lines.size() == 1 + kSteps, path + ": " + std::to_string(lines.size()) +
                                            " lines, expected one header and " +
                                            std::to_string(kSteps) + " rows");
      check(lines[0] == "step,loss,rank", path + ": header '" + lines[0] + "'");
      for (int step = 0; step < kSteps; ++step) {
        std::ostringstream expected;
        expected << step << ',' << offset + step << ",0";
        check(lines[static_cast<size_t>(step) + 1] == expected.str(),
              path + ": row '" + lines[static_cast<size_t>(step) + 1] + "', expected '" +
                  expected.str() + "'");
      }
    }
    std::filesystem::remove(before_path, ignored);
    std::filesystem::remove(after_path, ignored);
  }
  fabric.print("rank-zero files: one header and " + std::to_string(kSteps) + " rows of rank 0 on " +
               std::to_string(fabric.world_size()) + " ranks");
  return 0;
}

}  // namespace fabric_test
