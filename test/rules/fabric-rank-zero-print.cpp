// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>
#include <fabric/fabric.h>
#include <cstdlib>
#include <stdexcept>

// A helper main calls once it has its Fabric gets it too, so it prints once.
// CHECK: {{^}}void banner(fabric::Fabric& fabric) { fabric.print() << "hello\n"; }
void banner() { std::cout << "hello\n"; }

// A helper that uses no LibTorch and cannot get the Fabric (main calls it
// while parsing its arguments, before the Fabric exists): left as it is,
// without a finding; its output is not training output.
// CHECK: {{^}}void usage() { std::cout << "usage: train [epochs]\n"; }
void usage() { std::cout << "usage: train [epochs]\n"; }

// Already on one rank: left as the user wrote it.
// CHECK: {{^  }}if (fabric.is_global_zero()) std::cout << "rank zero\n";
// CHECK-NEXT: {{^  }}if (fabric.global_rank() == 0) {
// CHECK-NEXT: {{^    }}printf("rank zero\n");
void report(fabric::Fabric& fabric) {
  if (fabric.is_global_zero()) std::cout << "rank zero\n";
  if (fabric.global_rank() == 0) {
    printf("rank zero\n");
  }
}

// A helper that prints to std::cout by default (a command-line parser's
// dump()): its declaration stays, the call passes the rank-zero stream.
// CHECK: {{^}}  void dump(std::ostream& out = std::cout) const;
// CHECK: {{^}}  void table(int width, std::ostream& out = std::cout) const;
struct Options {
  void dump(std::ostream& out = std::cout) const;
  void table(int width, std::ostream& out = std::cout) const;
};

// CHECK: {{^  }}options.dump(fabric.print());
// CHECK-NEXT: {{^  }}options.table(8, fabric.print());
// CHECK-NEXT: {{^  }}options.dump(std::cerr);
// CHECK: {{^    }}fabric.print() << "epoch " << epoch << std::endl;
// CHECK-NEXT: {{^    }}fabric.printf("loss %.4f\n", 0.5);
// CHECK-NEXT: {{^    }}fabric.printf("step %d\n", epoch);
// Errors stay visible on every rank.
// CHECK-NEXT: {{^    }}std::cerr << "warning\n";
int main(int argc, char** argv) {
  if (argc > 2) {
    usage();
    return 2;
  }
  torch::manual_seed(0);
  Options options;
  options.dump();
  options.table(8);
  options.dump(std::cerr);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::cout << "epoch " << epoch << std::endl;
    std::printf("loss %.4f\n", 0.5);
    printf("step %d\n", epoch);
    std::cerr << "warning\n";
  }
  banner();
  // An error path stays on every rank: when rank 1 fails, its reason shows.
  // CHECK: {{^    }}std::cout << "training failed: " << error.what() << std::endl;
  // CHECK-NEXT: {{^    }}return -1;
  try {
    options.dump(std::cerr);
  } catch (const std::exception& error) {
    std::cout << "training failed: " << error.what() << std::endl;
    return -1;
  }
  // CHECK: {{^    }}std::cout << "cannot read the data set\n";
  // CHECK-NEXT: {{^    }}std::exit(1);
  if (argc > 3) {
    std::cout << "cannot read the data set\n";
    std::exit(1);
  }
  // CHECK: {{^    }}printf("bad shape\n");
  // CHECK-NEXT: {{^    }}abort();
  if (argc > 4) {
    printf("bad shape\n");
    abort();
  }
  // CHECK: {{^    }}std::cout << "no checkpoint\n";
  // CHECK-NEXT: {{^    }}throw std::runtime_error("no checkpoint");
  if (argc > 5) {
    std::cout << "no checkpoint\n";
    throw std::runtime_error("no checkpoint");
  }
  // A handler that shows the exception and goes on (this rank skips its bad
  // sample): every rank; the load-or-start-fresh idiom: rank 0.
  // CHECK: {{^    }}std::cout << "skipping a bad sample: " << bad.what() << "\n";
  // CHECK: {{^    }}fabric.print() << "starting fresh\n";
  try {
    options.dump(std::cerr);
  } catch (const std::exception& bad) {
    std::cout << "skipping a bad sample: " << bad.what() << "\n";
  }
  try {
    options.dump(std::cerr);
  } catch (const std::exception&) {
    std::cout << "starting fresh\n";
  }
  // Not an error: a zero return, a `return false`-like end, a later failure
  // in an enclosing block.
  // CHECK: {{^    }}fabric.print() << "done early\n";
  // CHECK-NEXT: {{^    }}return 0;
  if (argc > 6) {
    std::cout << "done early\n";
    return 0;
  }
  // CHECK: {{^      }}fabric.print() << "checking\n";
  if (argc > 7) {
    if (argc > 8) {
      std::cout << "checking\n";
    }
    return 3;
  }
  return 0;
}
