// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

class Pairs : public torch::data::datasets::Dataset<Pairs> {
 public:
  torch::data::Example<> get(size_t i) override;
  torch::optional<size_t> size() const override;
};

// Blocks holding only moves the Fabric makes itself disappear whole.
// CHECK: {{^  }}Net model;
// CHECK-NEXT: {{^  }}torch::optim::Adam optimizer(model->parameters());
// CHECK: {{^    }}auto data = batch.data, target = batch.target;
// CHECK-NEXT: {{^    }}optimizer.zero_grad();
//
// A block that does more keeps its other statements.
// CHECK: {{^  }}if (torch::cuda::is_available()) {
// CHECK-NEXT: {{^    }}std::cerr << "using CUDA\n";
// CHECK-NEXT: {{^  }}}
//
// With an else branch the if stays; only its moves change.
// CHECK: {{^  }}if (torch::cuda::is_available()) {
// CHECK-NEXT: {{^  }}} else {
int main() {
  Net model;
  if (torch::cuda::is_available()) {
    model->to(torch::kCUDA);
  }
  torch::optim::Adam optimizer(model->parameters());
  auto loader = torch::data::make_data_loader(Pairs().map(torch::data::transforms::Stack<>()), 8);
  for (auto& batch : *loader) {
    auto data = batch.data, target = batch.target;
    if (torch::cuda::is_available()) {
      data = data.cuda();
      target = target.cuda();
    }
    optimizer.zero_grad();
  }
  if (torch::cuda::is_available()) {
    model->to(torch::kCUDA);
    std::cerr << "using CUDA\n";
  }
  if (torch::cuda::is_available()) {
    model->to(torch::kCUDA);
  } else {
    std::cerr << "no CUDA\n";
  }
  return 0;
}
