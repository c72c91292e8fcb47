// The CI lint finds stray .cuda() calls and hard-coded devices wherever they
// are: in a helper function and in a Trainer's method of a project that was
// migrated already, and in a function nothing calls. Where the Fabric can be
// passed in, the finding carries the fix; where not, it says why.
// RUN: cd %S && %lint cuda-anywhere.cpp -- %flags > %t.out 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.out
#include <torch/torch.h>
#include <fabric/fabric.h>

// CHECK-DAG: cuda-anywhere.cpp:[[@LINE+1]]:48: warning: move to the device this rank trains on [fabric-device-move]
torch::Tensor to_gpu(torch::Tensor x) { return x.cuda(); }

// CHECK-DAG: cuda-anywhere.cpp:[[@LINE+1]]:48: warning: not migrated (move to the device this rank trains on): nothing in the project calls `unused`{{.*}}[fabric-device-move]
torch::Tensor unused(torch::Tensor x) { return x.cuda(); }

// At namespace scope no Fabric exists yet: reported, without a fix.
// CHECK-DAG: cuda-anywhere.cpp:[[@LINE+1]]:23: warning: a device move outside any function runs before the Fabric exists{{.*}}[fabric-device-move]
torch::Tensor kMean = torch::ones({3}).cuda();

class Trainer {
 public:
  explicit Trainer(fabric::Fabric& fabric) : fabric_(fabric) {}
  // CHECK-DAG: cuda-anywhere.cpp:[[@LINE+1]]:49: warning: move to the device this rank trains on [fabric-device-move]
  torch::Tensor batch(torch::Tensor x) { return x.cuda(); }
  // CHECK-DAG: cuda-anywhere.cpp:[[@LINE+1]]:55: warning: hard-coded device index{{.*}}[fabric-hardcoded-device]
  torch::Tensor pinned(torch::Tensor x) { return x.to(torch::Device(torch::kCUDA, 1)); }

 private:
  fabric::Fabric& fabric_;
};

int main() {
  fabric::Fabric fabric;
  fabric.launch();
  Trainer trainer(fabric);
  auto x = to_gpu(torch::randn({2}));
  trainer.batch(x);
  trainer.pinned(x);
  return 0;
}
// The fix for the helper passes the Fabric in; the fixed index gets no fix.
// RUN: not grep -F '{26:55' %t.out
// RUN: not grep -F '{18:23' %t.out
// CHECK-DAG: fix-it: {{.*}}"fabric::Fabric& fabric, "
// CHECK-DAG: fix-it: {{.*}}"x.to(fabric.device())"
