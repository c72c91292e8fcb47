// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --input-file=%t.err --check-prefix=MSG
// RUN: %migrate %t.cpp -- %flags > %t2.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t2.cpp
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

#define TO_GPU(t) (t).cuda()

// In a function that receives the Fabric under another name.
// CHECK: {{^}}torch::Tensor noise_on(fabric::Fabric& f) { return torch::randn({2}).to(f.device()); }
#include <fabric/fabric.h>
torch::Tensor noise_on(fabric::Fabric& f) { return torch::randn({2}).cuda(); }

// A helper given the device moves to it: its caller decides (main's device
// becomes fabric.device()), so the helper needs no Fabric of its own.
// CHECK: {{^}}torch::Tensor place(torch::Tensor x, const torch::Device& device) { return x.to(device); }
torch::Tensor place(torch::Tensor x, const torch::Device& device) { return x.to(device); }

// Device-agnostic code follows its data: another tensor's device, a local
// taken from one, the CPU (a batch moved off the device to save it). Right
// on any number of ranks: untouched, and nothing reported, so the helpers
// need no Fabric.
// CHECK: {{^}}torch::Tensor normalize(torch::Tensor images) {
// CHECK-NEXT: {{^}}  auto mean = torch::ones({3}).to(images.device());
// CHECK-NEXT: {{^}}  auto where = images.device();
// CHECK-NEXT: {{^}}  auto scale = torch::ones({3}).to(where);
// CHECK-NEXT: {{^}}  return images + mean + scale;
// CHECK: {{^}}void save_preview(torch::Tensor batch, Net& net) {
// CHECK-NEXT: {{^}}  torch::Tensor host = batch.to(torch::kCPU);
// CHECK-NEXT: {{^}}  torch::Tensor same = batch.to(torch::Device("cpu"));
// CHECK-NEXT: {{^}}  net->to(torch::kCPU);
torch::Tensor normalize(torch::Tensor images) {
  auto mean = torch::ones({3}).to(images.device());
  auto where = images.device();
  auto scale = torch::ones({3}).to(where);
  return images + mean + scale;
}
void save_preview(torch::Tensor batch, Net& net) {
  torch::Tensor host = batch.to(torch::kCPU);
  torch::Tensor same = batch.to(torch::Device("cpu"));
  net->to(torch::kCPU);
}

// Outside every function the move runs before any Fabric exists: reported,
// left as it is.
// CHECK: {{^}}torch::Tensor global_mean = torch::ones({3}).cuda();
// CHECK: {{^}}  torch::Tensor scale = torch::ones({1}).cuda();
// MSG-DAG: fabric-device-move.cpp:[[@LINE+2]]:29: warning: a device move outside any function runs before the Fabric exists{{.*}}[fabric-device-move]
// MSG-DAG: fabric-device-move.cpp:[[@LINE+3]]:25: warning: a device move outside any function{{.*}}[fabric-device-move]
torch::Tensor global_mean = torch::ones({3}).cuda();
struct Normalizer {
  torch::Tensor scale = torch::ones({1}).cuda();
};

// The set-up model's move goes; its dtype conversion stays. A frozen module
// without an optimizer still needs the device.
// CHECK: {{^  }}Net model;
// CHECK-NEXT: {{^  }}Net teacher;
// CHECK-NEXT: {{^  }}model->to(torch::kHalf);
// CHECK-NEXT: {{^  }}teacher->to(fabric.device());
// CHECK-NEXT: {{^  }}torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
//
// Batches from the loader arrive on the device: their moves go, dtypes stay.
// CHECK: {{^    }}auto x = batch.data;
// CHECK-NEXT: {{^    }}auto y = batch.target.to(torch::kHalf);
// CHECK-NEXT: {{^    }}auto z = batch.target;
// CHECK-NEXT: {{^    }}auto copy = batch.data;
// CHECK-NEXT: {{^    }}auto w = batch.data.to(torch::kFloat);
// A self-move of a batch copy is removed with its line.
// CHECK-NEXT: {{^    }}{
// CHECK-NEXT: {{^    }}}
// CHECK: {{^    }}auto host = batch.data.to(torch::kCPU);
// CHECK-NEXT: {{^    }}copy = copy.to(torch::kCPU);
//
// Anything else moves to the rank's device.
// CHECK: {{^  }}auto noise = torch::randn({2, 2}).to(fabric.device());
// CHECK-NEXT: {{^  }}auto other = noise.to(fabric.device());
// CHECK-NEXT: {{^  }}auto halved = noise.to(fabric.device(), torch::kHalf);
// CHECK-NEXT: {{^  }}auto cast = noise.to(torch::kFloat);
// CHECK-NEXT: {{^  }}auto in_macro = TO_GPU(noise);
// CHECK: {{^  }}auto on_chosen = noise.to(fabric.device());
// MSG: fabric-device-move.cpp:[[@LINE+29]]:19: warning: not migrated: the code is inside a macro expansion {{.*}} [fabric-device-move]
int main() {
  torch::Device device(torch::kCUDA);
  torch::Device chosen = torch::kCPU;  // the program's device: CUDA when there is one
  if (torch::cuda::is_available()) chosen = torch::kCUDA;
  auto loader = torch::data::make_data_loader(Pairs().map(torch::data::transforms::Stack<>()), 8);
  Net model;
  Net teacher;
  model->to(device);
  model->to(device, torch::kHalf);
  teacher->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  for (auto& batch : *loader) {
    auto x = batch.data.to(device);
    auto y = batch.target.to(device, torch::kHalf);
    auto z = batch.target.cuda();
    auto copy = batch.data;
    auto w = batch.data.to(torch::kFloat);
    {
      copy = copy.cuda();
    }
    // A batch moved to the CPU (to save it) stays on the CPU.
    auto host = batch.data.to(torch::kCPU);
    copy = copy.to(torch::kCPU);
  }
  auto noise = torch::randn({2, 2}).cuda();
  auto other = noise.to(device);
  auto halved = noise.to(device, torch::kHalf);
  auto cast = noise.to(torch::kFloat);
  auto in_macro = TO_GPU(noise);
  auto placed = place(noise, device);
  auto on_chosen = noise.to(chosen);
  return 0;
}

// A training class (it holds the optimizer) with one module member: that is
// the model main sets up, so its move goes. With a second module member (a
// frozen teacher) no member is assumed to be the trained one.
// CHECK: {{^}}  explicit Trainer(fabric::Fabric& fabric, Net model, torch::optim::Optimizer& optimizer, torch::Device device)
// CHECK-NEXT: {{^}}      : fabric_(fabric), model_(model), optimizer_(optimizer) {
// CHECK-NEXT: {{^}}  }
class Trainer {
 public:
  explicit Trainer(Net model, torch::optim::Optimizer& optimizer, torch::Device device)
      : model_(model), optimizer_(optimizer) {
    model_->to(device);
  }

 private:
  Net model_;
  torch::optim::Optimizer& optimizer_;
};
// CHECK: {{^}}    student_->to(fabric_.device());
// CHECK-NEXT: {{^}}    teacher_->to(fabric_.device());
class Distiller {
 public:
  Distiller(Net student, Net teacher, torch::optim::Optimizer& optimizer, torch::Device device)
      : student_(student), teacher_(teacher), optimizer_(optimizer) {
    student_->to(device);
    teacher_->to(device);
  }

 private:
  Net student_, teacher_;
  torch::optim::Optimizer& optimizer_;
};

// Tensors created on CUDA are created on the rank's device; CPU stays CPU.
// CHECK: {{^  }}auto a = torch::zeros({2}, torch::TensorOptions().device(fabric.device()));
// CHECK-NEXT: {{^  }}auto b = torch::ones({2}, fabric.device());
// CHECK-NEXT: {{^  }}auto c = torch::randn({2}, torch::TensorOptions().device(fabric.device()).dtype(torch::kHalf));
// CHECK-NEXT: {{^  }}auto d = torch::ones({2}, torch::kCPU);
// CHECK-NEXT: {{^  }}bool on_gpu = fabric.device().type() == torch::kCUDA;
void make_tensors(fabric::Fabric& fabric) {
  auto a = torch::zeros({2}, torch::TensorOptions().device(torch::kCUDA));
  auto b = torch::ones({2}, torch::kCUDA);
  auto c = torch::randn({2}, torch::TensorOptions().device(torch::Device("cuda:0")).dtype(torch::kHalf));
  auto d = torch::ones({2}, torch::kCPU);
  bool on_gpu = fabric.device().type() == torch::kCUDA;
}
