// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --input-file=%t.err --check-prefix=MSG
// RUN: %migrate %t.cpp -- %flags > %t2.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t2.cpp
#include <torch/torch.h>

#include <fstream>
#include <string>

// Code that gets no Fabric (nothing calls it here) and a logger class of
// the project's own (its constructor cannot take the Fabric): the free
// fabric::rank_zero_ofstream decides rank zero from the environment.
// CHECK: {{^}}void dump() { std::ofstream out(fabric::rank_zero_ofstream("dump.txt")); out << 1; }
void dump() { std::ofstream out("dump.txt"); out << 1; }
// CHECK: {{^}}  explicit CsvLogger(const std::string& path) : out_(fabric::rank_zero_ofstream(path)) {}
// CHECK: {{^}}  void reopen(const std::string& path) { out_ = fabric::rank_zero_ofstream(path, std::ios::app); }
class CsvLogger {
 public:
  explicit CsvLogger(const std::string& path) : out_(path) {}
  void reopen(const std::string& path) { out_.open(path, std::ios::app); }
  void write(double value) { out_ << value << "\n"; }

 private:
  std::ofstream out_;
};

// In a tool of the project without LibTorch (its compile command does not
// reach <torch/torch.h>) nothing changes: the runtime is not linked there.
// RUN: sed -n '/^\/\/ TOOL-BEGIN/,/^\/\/ TOOL-END/p' %s > %t.tool.cpp
// RUN: %migrate %t.tool.cpp -- -std=c++17 > %t.tool.out 2> /dev/null
// RUN: diff %t.tool.cpp %t.tool.out
// TOOL-BEGIN
// #include <fstream>
// void export_rows() { std::ofstream out("rows.csv"); out << 1; }
// TOOL-END

// A class that trains: its member initialiser opens the log through rank 0.
struct Logger {
  Logger(torch::optim::Optimizer& optimizer, const std::string& path)
      : optimizer_(optimizer), log_(path) {}
  // CHECK: {{^}}      : fabric_(fabric), optimizer_(optimizer), log_(fabric_.rank_zero_ofstream(path)) {}
  torch::optim::Optimizer& optimizer_;
  std::ofstream log_;
};

int main() {
  torch::manual_seed(0);
  // CHECK: {{^  }}std::ofstream log(fabric.rank_zero_ofstream("loss.csv"));
  std::ofstream log("loss.csv");
  // The mode the user wrote is kept; a defaulted one is not spelled out.
  // CHECK: {{^  }}std::ofstream metrics(fabric.rank_zero_ofstream("metrics.csv", std::ios::app));
  std::ofstream metrics("metrics.csv", std::ios::app);
  // CHECK: {{^  }}std::ofstream later;
  // CHECK-NEXT: {{^  }}later = fabric.rank_zero_ofstream(std::string("later") + ".csv");
  std::ofstream later;
  later.open(std::string("later") + ".csv");
  // Reading files and moving streams are not opens for writing.
  // CHECK: {{^  }}std::ifstream config("config.txt");
  // CHECK-NEXT: {{^  }}std::ofstream moved(std::move(log));
  std::ifstream config("config.txt");
  std::ofstream moved(std::move(log));
  for (int step = 0; step < 3; ++step) moved << step << "\n";
  // C stdio cannot be rewritten safely: reported; reading is fine.
  // MSG: fabric-rank-zero-file.cpp:[[@LINE+1]]:17: warning: every rank opens this file for writing{{.*}}[fabric-rank-zero-file]
  FILE* c_log = fopen("c_log.txt", "a");
  FILE* input = std::fopen("input.txt", "r");
  // A pipe to a command that writes the loss curve: rank 0's; one the
  // program reads from runs on every rank.
  // CHECK: {{^  }}FILE* plot = fabric.rank_zero_popen("gnuplot", "w");
  // CHECK-NEXT: {{^  }}FILE* revision = popen("git rev-parse HEAD", "r");
  FILE* plot = popen("gnuplot", "w");
  FILE* revision = popen("git rev-parse HEAD", "r");
  // MSG-NOT: warning
  return 0;
}
