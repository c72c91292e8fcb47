// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --check-prefix=SAVE --implicit-check-not="[fabric-checkpoint]"
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags > %t2.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t2.cpp
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

void train_agent();

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
  train_agent();
  raw_archive->save_to("raw.pt");
  return 0;
}

// Data is not a checkpoint. A tensor read from a file in a data set's get()
// (virtual: it could not take the Fabric) is every rank's own read: left
// as it is, nothing reported. A tensor written in a helper nothing gives the
// Fabric stays too; in code that has the Fabric it is written once, by rank
// 0, before any rank reads it back.
// CHECK: {{^}}    torch::load(window, "tokens_" + std::to_string(index) + ".pt");
// CHECK: {{^}}  torch::save(image, "preview.pt");
// CHECK: {{^}}  fabric.save("tokens.pt", tokens);
// CHECK-NEXT: {{^}}  torch::Tensor reread;
// CHECK-NEXT: {{^}}  torch::load(reread, "tokens.pt");
struct Windows : torch::data::datasets::Dataset<Windows> {
  torch::data::Example<> get(size_t index) override {
    torch::Tensor window;
    torch::load(window, "tokens_" + std::to_string(index) + ".pt");
    return {window, window};
  }
  c10::optional<size_t> size() const override;
};
void save_preview(torch::Tensor image) {
  torch::save(image, "preview.pt");
}

// A save reached only where this rank's own value improved: rank 0 writes
// when its condition holds (the collective fabric.save would leave the other
// ranks behind), and a person is told.
// CHECK: {{^}}      if (fabric.is_global_zero()) torch::save(policy, "best.pt");
// SAVE: fabric-checkpoint.cpp:[[@LINE+12]]:9: warning: this save is reached only on ranks where this condition holds{{.*}}[fabric-checkpoint]
void train_agent() {
  Net policy;
  torch::optim::SGD optimizer(policy->parameters(), torch::optim::SGDOptions(0.1));
  torch::Tensor tokens = torch::ones({4});
  torch::save(tokens, "tokens.pt");
  torch::Tensor reread;
  torch::load(reread, "tokens.pt");
  double best = -1e9;
  for (int episode = 0; episode < 10; ++episode) {
    torch::Tensor reward = policy->forward(tokens).sum();
    double average = reward.item<double>();
    if (average > best) {
      best = average;
      torch::save(policy, "best.pt");
    }
    reward.backward();
    optimizer.step();
  }
}
