// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

#include <fstream>
#include <string>

// Outside a Fabric scope: untouched.
// CHECK: {{^}}void dump() { std::ofstream out("dump.txt"); out << 1; }
void dump() { std::ofstream out("dump.txt"); out << 1; }

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
  return 0;
}
