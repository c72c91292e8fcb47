// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl();
};
TORCH_MODULE(Net);

// CHECK: {{^  }}fabric.save("model.pt", model);
// CHECK-NEXT: {{^  }}fabric.save(path + ".opt", optimizer);
// CHECK-NEXT: {{^  }}fabric.load("model.pt", model);
// A tensor saved to a stream keeps torch's form: three arguments.
// CHECK-NEXT: {{^  }}torch::save(model, "a", "b");
// An archive saved to a path goes through rank 0, also through a pointer; to
// a stream it keeps its call (std::cout is rank 0's through
// fabric-rank-zero-print).
// CHECK: {{^  }}model->save(archive);
// CHECK-NEXT: {{^  }}fabric.save("blocks.pt", archive);
// CHECK-NEXT: {{^  }}fabric.save(path + ".archive", archive);
// CHECK-NEXT: {{^  }}archive.save_to(fabric.print());
// CHECK-NEXT: {{^  }}fabric.save("shared.pt", *shared_archive);
// CHECK: {{^  }}fabric.save("raw.pt", *raw_archive);
int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  std::string path = "ckpt";
  torch::save(model, "model.pt");
  torch::save(optimizer, path + ".opt");
  torch::load(model, "model.pt");
  torch::save(model, "a", "b");
  torch::serialize::OutputArchive archive;
  auto shared_archive = std::make_shared<torch::serialize::OutputArchive>();
  model->save(archive);
  archive.save_to("blocks.pt");
  archive.save_to(path + ".archive");
  archive.save_to(std::cout);
  shared_archive->save_to("shared.pt");
  torch::serialize::OutputArchive* raw_archive = &archive;
  raw_archive->save_to("raw.pt");
  return 0;
}
