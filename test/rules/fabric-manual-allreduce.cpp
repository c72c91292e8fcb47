// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --check-prefix=MSG --implicit-check-not='[fabric-manual-allreduce]'
// RUN: FileCheck %s --input-file=%t.cpp
#include <torch/torch.h>

extern "C" int MPI_Allreduce(const void* send, void* recv, int count, int type, int op, int comm);
namespace c10d {
class ProcessGroup {
 public:
  void allreduce(std::vector<at::Tensor>& tensors);
};
}  // namespace c10d

// Reported, never edited.
// CHECK: {{^    }}group.allreduce(grads);
// CHECK-NEXT: {{^    }}MPI_Allreduce(nullptr, nullptr, 1, 0, 0, 0);
// MSG: fabric-manual-allreduce.cpp:[[@LINE+4]]:5: warning: hand-written all-reduce{{.*}}[fabric-manual-allreduce]
// MSG: fabric-manual-allreduce.cpp:[[@LINE+4]]:5: warning: hand-written all-reduce{{.*}}[fabric-manual-allreduce]
void sync(c10d::ProcessGroup& group) {
  std::vector<at::Tensor> grads;
    group.allreduce(grads);
    MPI_Allreduce(nullptr, nullptr, 1, 0, 0, 0);
}
// Not reported: the Fabric's own collective for a metric, and a method of
// another class that happens to be called allreduce.
#include <fabric/fabric.h>
struct Meter {
  void allreduce(std::vector<at::Tensor>& values);
};
double mean_loss(fabric::Fabric& fabric, torch::Tensor loss, Meter& meter, std::vector<at::Tensor>& values) {
  meter.allreduce(values);
  return fabric.all_reduce(loss).item<double>();
}
int main() { return 0; }
