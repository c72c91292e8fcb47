// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --check-prefix=SAVE --implicit-check-not="[fabric-checkpoint]"
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags > %t2.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t2.cpp
#include <torch/torch.h>

#include <deque>
#include <numeric>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

void train_agent();
void train_window();
void resume(const std::string& prefix);

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
  train_window();
  resume(path);
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

// The mean of a window of this rank's episode returns (a deque fed with
// push_back, the returns summed from a vector fed the same way) is this
// rank's too; a milestone from a list of constants is every rank's: its save
// stays the collective one.
// CHECK-LABEL: void train_window(fabric::Fabric& fabric) {
// CHECK: {{^}}      if (fabric.is_global_zero()) torch::save(policy, "best_window.pt");
// CHECK: {{^}}    if (episode == milestones.back()) fabric.save("milestone.pt", policy);
// SAVE: fabric-checkpoint.cpp:[[@LINE+16]]:9: warning: this save is reached only on ranks where this condition holds{{.*}}[fabric-checkpoint]
void train_window() {
  Net policy;
  torch::optim::SGD optimizer(policy->parameters(), torch::optim::SGDOptions(0.1));
  std::deque<double> recent;
  std::vector<double> milestones;
  milestones.push_back(5);
  double best = -1e9;
  for (int episode = 0; episode < 10; ++episode) {
    torch::Tensor reward = policy->forward(torch::ones({4})).sum();
    std::vector<double> rewards;
    rewards.push_back(reward.item<double>());
    double total = 0;
    for (double r : rewards) total += r;
    recent.push_back(total);
    const double mean = std::accumulate(recent.begin(), recent.end(), 0.0) / recent.size();
    if (mean > best) {
      best = mean;
      torch::save(policy, "best_window.pt");
    }
    if (episode == milestones.back()) torch::save(policy, "milestone.pt");
    reward.backward();
    optimizer.step();
  }
}

// An archive that only carries one model or optimizer between a file and the
// object becomes one fabric.save/fabric.load of that object (a holder or a
// shared_ptr to a module as it is; a raw or unique pointer, or an optimizer
// through a pointer, as `*`). An archive that carries more, is named again,
// or whose read is not right before its use keeps its calls.
// CHECK: {{^}}    archive.load_from(path);
// CHECK-NEXT: {{^}}    load(archive);
// CHECK-LABEL: {{^}}void resume(fabric::Fabric& fabric, const std::string& prefix) {
// CHECK: {{^}}  fabric.save(prefix + "_model.pt", model);
// CHECK-NEXT: {{^}}  fabric.save(prefix + "_optimizer.pt", *optimizer);
// CHECK-NEXT: {{^}}  // Read back, as a resume does.
// CHECK-NEXT: {{^}}  fabric.load(prefix + "_model.pt", model);
// CHECK-NEXT: {{^}}  fabric.load(prefix + "_optimizer.pt", *optimizer);
// CHECK-NEXT: {{^}}  fabric.load("raw.pt", *raw);
// CHECK-NEXT: {{^}}  fabric.load("shared.pt", shared);
// CHECK-NEXT: {{^}}  fabric.load("owned.pt", *owned);
// CHECK-NEXT: {{^}}  fabric.load("by_value.pt", by_value);
// CHECK-NEXT: {{^}}  torch::serialize::OutputArchive both;
// CHECK-NEXT: {{^}}  model->save(both);
// CHECK-NEXT: {{^}}  optimizer->save(both);
// CHECK-NEXT: {{^}}  fabric.save("both.pt", both);
// CHECK-NEXT: {{^}}  torch::serialize::InputArchive late;
// CHECK-NEXT: {{^}}  late.load_from("late.pt");
// CHECK-NEXT: {{^}}  fabric.print() << "loading" << std::endl;
// CHECK-NEXT: {{^}}  model->load(late);
// CHECK-NEXT: {{^}}  torch::serialize::InputArchive streamed;
// CHECK-NEXT: {{^}}  streamed.load_from(std::cin);
// CHECK-NEXT: {{^}}  model->load(streamed);
// CHECK-NEXT: {{^}}  torch::serialize::InputArchive passed;
// CHECK-NEXT: {{^}}  passed.load_from("passed.pt");
// CHECK-NEXT: {{^}}  load_into(model, passed);
// CHECK: {{^}}  if (reward.item<double>() > 0) {
// CHECK-NEXT: {{^}}    torch::serialize::InputArchive best;
// CHECK-NEXT: {{^}}    best.load_from("best.pt");
// CHECK-NEXT: {{^}}    model->load(best);
// CHECK-NEXT: {{^}}  }
// CHECK-NEXT: {{^}}  torch::serialize::InputArchive copied;
// CHECK-NEXT: {{^}}  copied.load_from("copy.pt");
// CHECK-NEXT: {{^}}  copy_of(model)->load(copied);
// CHECK: {{^}}  torch::serialize::InputArchive indexed;
// CHECK-NEXT: {{^}}  indexed.load_from(paths[i]);
// CHECK-NEXT: {{^}}  models[i++]->load(indexed);
// CHECK-NEXT: {{^}}  Versioned versioned;
// CHECK-NEXT: {{^}}  torch::serialize::InputArchive versioned_in;
// CHECK-NEXT: {{^}}  versioned_in.load_from("versioned.pt");
// CHECK-NEXT: {{^}}  versioned.load(versioned_in);
// CHECK-NEXT: {{^}}}
struct PlainNet : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
void load_into(Net& model, torch::serialize::InputArchive& archive) { model->load(archive); }
Net copy_of(Net& model);
// A module that reads more than its parameters in its own load().
struct Versioned : torch::nn::Module {
  void load(torch::serialize::InputArchive& archive) override;
};
// A module that restores itself: `load(archive)` on `this` stays.
struct SelfLoading : torch::nn::Module {
  void restore(const std::string& path) {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    load(archive);
  }
};
void resume(const std::string& prefix) {
  Net model;
  auto optimizer = std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  auto shared = std::make_shared<NetImpl>();
  NetImpl* raw = shared.get();
  auto owned = std::make_unique<NetImpl>();
  PlainNet by_value;
  torch::serialize::OutputArchive model_archive;
  model->save(model_archive);
  model_archive.save_to(prefix + "_model.pt");
  torch::serialize::OutputArchive optimizer_archive;
  optimizer->save(optimizer_archive);
  optimizer_archive.save_to(prefix + "_optimizer.pt");
  // Read back, as a resume does.
  torch::serialize::InputArchive model_in;
  model_in.load_from(prefix + "_model.pt");
  model->load(model_in);
  torch::serialize::InputArchive optimizer_in;
  optimizer_in.load_from(prefix + "_optimizer.pt", torch::Device(torch::kCPU));
  optimizer->load(optimizer_in);
  torch::serialize::InputArchive raw_in;
  raw_in.load_from("raw.pt");
  raw->load(raw_in);
  torch::serialize::InputArchive shared_in;
  shared_in.load_from("shared.pt");
  shared->load(shared_in);
  torch::serialize::InputArchive owned_in;
  owned_in.load_from("owned.pt");
  owned->load(owned_in);
  torch::serialize::InputArchive by_value_in;
  by_value_in.load_from("by_value.pt");
  by_value.load(by_value_in);
  torch::serialize::OutputArchive both;
  model->save(both);
  optimizer->save(both);
  both.save_to("both.pt");
  torch::serialize::InputArchive late;
  late.load_from("late.pt");
  std::cout << "loading" << std::endl;
  model->load(late);
  torch::serialize::InputArchive streamed;
  streamed.load_from(std::cin);
  model->load(streamed);
  torch::serialize::InputArchive passed;
  passed.load_from("passed.pt");
  load_into(model, passed);
  // Left as written: a load under a condition only some ranks meet (a
  // collective there would wait for the others), into a temporary, with a
  // path and an object whose evaluation changes state, into a module whose
  // own load() reads more.
  torch::Tensor reward = model->forward(torch::ones({2})).sum();
  if (reward.item<double>() > 0) {
    torch::serialize::InputArchive best;
    best.load_from("best.pt");
    model->load(best);
  }
  torch::serialize::InputArchive copied;
  copied.load_from("copy.pt");
  copy_of(model)->load(copied);
  std::vector<std::string> paths{"a.pt", "b.pt"};
  std::vector<Net> models(2);
  size_t i = 0;
  torch::serialize::InputArchive indexed;
  indexed.load_from(paths[i]);
  models[i++]->load(indexed);
  Versioned versioned;
  torch::serialize::InputArchive versioned_in;
  versioned_in.load_from("versioned.pt");
  versioned.load(versioned_in);
}
