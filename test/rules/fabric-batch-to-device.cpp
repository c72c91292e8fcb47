// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --input-file=%t.err --check-prefix=DIAG
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
#include <torch/torch.h>

#include <string>
#include <vector>

// A dataset's example type: tensors move, a container of tensors goes
// through fabric::to_device, other members are copied.
// CHECK: {{^}}struct FaceBatch {
// CHECK: {{^}}};
// CHECK-EMPTY:
// CHECK-NEXT: {{^}}// Fabric loaders move each batch to the rank's device with this overload
// CHECK-NEXT: {{^}}// (found by argument-dependent lookup; see fabric/to_device.h).
// CHECK-NEXT: {{^}}inline FaceBatch to_device(const FaceBatch& batch, const torch::Device& device) {
// CHECK-NEXT: {{^}}  FaceBatch moved = batch;
// CHECK-NEXT: {{^}}  moved.images = batch.images.to(device);
// CHECK-NEXT: {{^}}  moved.masks = fabric::to_device(batch.masks, device);
// CHECK-NEXT: {{^}}  return moved;
// CHECK-NEXT: {{^}}}
// CHECK-EMPTY:
// CHECK-NEXT: {{^}}class FaceDataset
struct FaceBatch {
  torch::Tensor images;
  std::vector<torch::Tensor> masks;
  std::string id;
};

class FaceDataset : public torch::data::datasets::Dataset<FaceDataset, FaceBatch> {
 public:
  FaceBatch get(size_t index) override;
  c10::optional<size_t> size() const override;
};

// A collation's output, in a namespace: the overload joins it there.
namespace data {
struct Pair {
  torch::Tensor left, right;
};
// CHECK: {{^}}inline Pair to_device(const Pair& batch, const torch::Device& device) {
// CHECK-NEXT: {{^}}  Pair moved = batch;
// CHECK-NEXT: {{^}}  moved.left = batch.left.to(device);
// CHECK-NEXT: {{^}}  moved.right = batch.right.to(device);
struct StackPairs : torch::data::transforms::Collation<Pair, std::vector<Pair>> {
  Pair apply_batch(std::vector<Pair> pairs) override;
};
}  // namespace data

// One with its own overload already: left alone.
struct Owned {
  torch::Tensor x;
};
Owned to_device(const Owned& batch, const torch::Device& device);
class OwnedDataset : public torch::data::datasets::Dataset<OwnedDataset, Owned> {
 public:
  Owned get(size_t index) override;
  c10::optional<size_t> size() const override;
};
// CHECK-NOT: {{^}}inline Owned to_device

// Nested in a class: reported, not edited (a free function cannot go there).
struct Holder {
  struct Inner {
    torch::Tensor x;
  };
};
class InnerDataset : public torch::data::datasets::Dataset<InnerDataset, Holder::Inner> {
 public:
  Holder::Inner get(size_t index) override;
  c10::optional<size_t> size() const override;
};
// DIAG: fabric-batch-to-device.cpp:[[@LINE-9]]:3: warning: not migrated: the batch type is nested in a class{{.*}}[fabric-batch-to-device]
// CHECK-NOT: {{^}}inline Inner to_device
// CHECK-NOT: {{^}}inline Holder::Inner to_device

// Library types (Example<>) need nothing.
class Plain : public torch::data::datasets::Dataset<Plain> {
 public:
  torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;
};
