// Code the project's GCC compiles parses here too (issue 39): a fold
// expression over 300 values, as enum reflection headers write, nests 300
// deep, past Clang's default limit of 256 (GCC has none). And what Clang
// still needs told goes in with --extra-arg, after the compile command's
// own flags; without it the file does not compile, and the message says how.
// RUN: rm -rf %t.out %t.out2 %t.out3
// RUN: %fabricize %s -o %t.out -- %flags 2> %t.err; test $? -le 1
// RUN: FileCheck %s --input-file=%t.out/gcc-limits.cpp --check-prefix=MIGRATED
// RUN: %fabricize %s -o %t.out2 -- %flags -DREQUIRE_SETTING 2> %t.err2; test $? -eq 2
// RUN: FileCheck %s --input-file=%t.err2 --check-prefix=HINT
// RUN: test ! -e %t.out2
// RUN: %fabricize %s -o %t.out3 --extra-arg=-DPROJECT_SETTING=1 --extra-arg=-Wl,--as-needed -- %flags -DREQUIRE_SETTING 2> %t.err3; test $? -le 1
// RUN: FileCheck %s --input-file=%t.out3/gcc-limits.cpp --check-prefix=MIGRATED
// HINT: error: {{.*}}gcc-limits.cpp: does not compile
// HINT: note: if the project's own compiler builds it, Clang may need a flag {{.*}} --extra-arg=<flag>
// MIGRATED: fabric.backward(loss);
#include <torch/torch.h>

#if defined(REQUIRE_SETTING) && !defined(PROJECT_SETTING)
#error "the build defines PROJECT_SETTING"
#endif

template <int... Values>
constexpr int sum_of() { return (Values + ...); }

template <int... Values>
struct Pack {};

template <int N, int... Values>
struct Count : Count<N - 1, N, Values...> {};
template <int... Values>
struct Count<0, Values...> {
  static constexpr int sum = sum_of<Values...>();
};

static_assert(Count<300>::sum == 300 * 301 / 2, "a fold over 300 values");

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loss = model->forward(torch::randn({8, 4})).pow(2).mean();
  loss.backward();
  optimizer.step();
}
