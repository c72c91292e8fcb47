// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --check-prefix=ERR --input-file=%t.err
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
  torch::nn::Linear backbone{nullptr}, head{nullptr};
};
TORCH_MODULE(Net);

// A module held by value, as PyTorch's own C++ MNIST example holds it.
struct Plain : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};

// No Fabric here, and none can be passed in (nothing calls it): untouched,
// and an error, since every rank would train its own copy.
// ERR: fabric-setup.cpp:[[@LINE+4]]:3: warning: not migrated (set up the model{{.*}}): nothing in the project calls `pretrain`{{.*}}[fabric-setup]
// CHECK: {{^  }}torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^}}}
void pretrain(Net& net) {
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
}

// A config struct chooses the optimizer: it is held by a base-class
// shared_ptr and assigned in branches; the setup goes after the `if`.
struct Config {
  std::string optimizer = "sgd";
};
// CHECK-LABEL: {{^}}void choose(fabric::Fabric& fabric, const Config& config) {
// CHECK: {{^  }}} else {
// CHECK-NEXT: {{^    }}optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^  }}}
// CHECK-NEXT: {{^  }}fabric.setup(model, *optimizer);
// CHECK-NEXT: {{^  }}optimizer->zero_grad();
void choose(const Config& config) {
  Net model;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  if (config.optimizer == "adam") {
    optimizer = std::make_shared<torch::optim::Adam>(model->parameters());
  } else {
    optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  }
  optimizer->zero_grad();
}

// A learning rate per part of the model: the optimizer gets parameter
// groups, and the model is the one the groups' parameters come from.
// CHECK-LABEL: {{^}}void groups(fabric::Fabric& fabric) {
// CHECK: {{^  }}torch::optim::Adam optimizer(groups, torch::optim::AdamOptions(1e-3));
// CHECK-NEXT: {{^  }}fabric.setup(model, optimizer);
void groups() {
  Net model;
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(model->backbone->parameters(), std::make_unique<torch::optim::AdamOptions>(1e-4));
  groups.emplace_back(model->head->parameters());
  torch::optim::Adam optimizer(groups, torch::optim::AdamOptions(1e-3));
}

// One optimizer over two models: both are set up, the optimizer with the last.
// CHECK-LABEL: {{^}}void two_models(fabric::Fabric& fabric) {
// CHECK: {{^  }}torch::optim::SGD optimizer(params, torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^  }}fabric.setup(encoder);
// CHECK-NEXT: {{^  }}fabric.setup(decoder, optimizer);
void two_models() {
  Net encoder, decoder;
  std::vector<torch::Tensor> params = encoder->parameters();
  for (auto& p : decoder->parameters()) params.push_back(p);
  torch::optim::SGD optimizer(params, torch::optim::SGDOptions(0.1));
}

// A Trainer that makes its optimizer in its constructor's initialisers:
// the setup is the last thing the constructor's body does, after what it
// does to the model (a pretrained part loaded and frozen).
// CHECK-LABEL: {{^}}class Trainer {
// CHECK: {{^  }}explicit Trainer(fabric::Fabric& fabric, Net model)
// CHECK-NEXT: {{^      }}: fabric_(fabric), model_(model), optimizer_(std::make_unique<torch::optim::Adam>(model_->parameters())) {
// CHECK-NEXT: {{^    }}fabric_.load("encoder.pt", model_);
// CHECK-NEXT: {{^    }}for (auto& p : model_->parameters()) p.requires_grad_(false);
// CHECK-NEXT: {{^    }}optimizer_->zero_grad();
// CHECK-NEXT: {{^    }}fabric_.setup(model_, *optimizer_);
// CHECK-NEXT: {{^  }}}
class Trainer {
 public:
  explicit Trainer(Net model)
      : model_(model), optimizer_(std::make_unique<torch::optim::Adam>(model_->parameters())) {
    torch::load(model_, "encoder.pt");
    for (auto& p : model_->parameters()) p.requires_grad_(false);
    optimizer_->zero_grad();
  }

 private:
  Net model_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
};

// The constructor's last statement is a move the setup replaces: the setup
// takes its place.
// CHECK-LABEL: {{^}}class DeviceTrainer {
// CHECK: {{^      }}: fabric_(fabric), model_(model), optimizer_(std::make_unique<torch::optim::Adam>(model_->parameters())) {
// CHECK-NEXT: {{^    }}fabric_.setup(model_, *optimizer_);
// CHECK-NEXT: {{^  }}}
class DeviceTrainer {
 public:
  DeviceTrainer(Net model, torch::Device device)
      : model_(model), optimizer_(std::make_unique<torch::optim::Adam>(model_->parameters())) {
    model_->to(device);
  }

 private:
  Net model_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
};

// A factory that is handed the model makes the optimizer: the model is its
// argument.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(Net& net, double lr);
// CHECK-LABEL: {{^}}void factory(fabric::Fabric& fabric) {
// CHECK: {{^  }}auto optimizer = make_optimizer(model, 0.1);
// CHECK-NEXT: {{^  }}fabric.setup(model, *optimizer);
void factory() {
  Net model;
  auto optimizer = make_optimizer(model, 0.1);
  optimizer->zero_grad();
}

// An optimizer whose model cannot be found (a factory made it; a class
// gathers the parameters of modules it holds by pointer): the Fabric sets
// up the optimizer's parameters themselves. What a getter returns, and a
// null pointer, are not new optimizers.
std::unique_ptr<torch::optim::Optimizer> make_global_optimizer();
struct Owner {
  std::shared_ptr<torch::optim::Optimizer> optimizer() const;
};
struct GatheredModels {
  std::vector<torch::Tensor> parameters() const;
  Net* encoder = nullptr;
};
// CHECK-LABEL: {{^}}void untraced(fabric::Fabric& fabric, torch::Tensor loss) {
// CHECK-NEXT: {{^  }}auto optimizer = make_global_optimizer();
// CHECK-NEXT: {{^  }}fabric.setup_optimizer(*optimizer);
// CHECK-NEXT: {{^  }}GatheredModels experiment;
// CHECK-NEXT: {{^  }}torch::optim::SGD gathered(experiment.parameters(), torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^  }}fabric.setup_optimizer(gathered);
// CHECK-NEXT: {{^  }}std::shared_ptr<torch::optim::Optimizer> got = Owner().optimizer();
void untraced(torch::Tensor loss) {
  auto optimizer = make_global_optimizer();
  GatheredModels experiment;
  torch::optim::SGD gathered(experiment.parameters(), torch::optim::SGDOptions(0.1));
  std::shared_ptr<torch::optim::Optimizer> got = Owner().optimizer();
  std::unique_ptr<torch::optim::Optimizer> none = nullptr;
  loss.backward();
  optimizer->step();
}

// A module held by std::unique_ptr: the Fabric takes the module it owns,
// and the setup moves it to the device.
struct Owned : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
// CHECK-LABEL: {{^}}void unique_model(fabric::Fabric& fabric) {
// CHECK-NEXT: {{^  }}auto net = std::make_unique<Owned>();
// CHECK-NEXT: {{^  }}torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^  }}fabric.setup(*net, sgd);
void unique_model() {
  auto net = std::make_unique<Owned>();
  net->to(torch::kCUDA);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
}

// A struct holding the model.
struct Experiment {
  Net net{nullptr};
};

// CHECK-LABEL: {{^}}int main() {
// CHECK: {{^  }}torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^  }}fabric.setup(model, optimizer);
// Two optimizers over one module: one setup after the last, naming both.
// CHECK-NEXT: {{^  }}torch::optim::Adam head_opt(head->parameters());
// CHECK-NEXT: {{^  }}torch::optim::SGD head_sgd(head->parameters(), torch::optim::SGDOptions(0.01));
// CHECK-NEXT: {{^  }}fabric.setup(head, head_opt, head_sgd);
// By value; through a unique_ptr; a model in a struct.
// CHECK-NEXT: {{^  }}Plain plain;
// CHECK-NEXT: {{^  }}torch::optim::SGD plain_opt(plain.parameters(), torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^  }}fabric.setup(plain, plain_opt);
// CHECK-NEXT: {{^  }}Net other;
// CHECK-NEXT: {{^  }}auto owned = std::make_unique<torch::optim::Adam>(other->parameters());
// CHECK-NEXT: {{^  }}fabric.setup(other, *owned);
// CHECK-NEXT: {{^  }}Experiment exp;
// CHECK-NEXT: {{^  }}torch::optim::Adam exp_opt(exp.net->parameters());
// CHECK-NEXT: {{^  }}fabric.setup(exp.net, exp_opt);
// An alias of an optimizer is not another optimizer.
// CHECK-NEXT: {{^  }}torch::optim::Optimizer* alias = &optimizer;
// CHECK-NEXT: {{^  }}auto autocast = fabric.autocast();
// CHECK-NEXT: {{^  }}auto y = model->forward(torch::randn({2, 4}));
// CHECK-NEXT: {{^  }}choose(fabric, Config{});
// CHECK-NEXT: {{^  }}groups(fabric);
// CHECK-NEXT: {{^  }}two_models(fabric);
// CHECK-NEXT: {{^  }}Trainer trainer(fabric, model);
// CHECK-NEXT: {{^  }}factory(fabric);
// CHECK-NEXT: {{^  }}untraced(fabric, y.sum());
// CHECK-NEXT: {{^  }}unique_model(fabric);
void two_phases();

int main() {
  Net model;
  torch::nn::Linear head(4, 2);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::Adam head_opt(head->parameters());
  torch::optim::SGD head_sgd(head->parameters(), torch::optim::SGDOptions(0.01));
  Plain plain;
  torch::optim::SGD plain_opt(plain.parameters(), torch::optim::SGDOptions(0.1));
  Net other;
  auto owned = std::make_unique<torch::optim::Adam>(other->parameters());
  Experiment exp;
  torch::optim::Adam exp_opt(exp.net->parameters());
  torch::optim::Optimizer* alias = &optimizer;
  auto y = model->forward(torch::randn({2, 4}));
  choose(Config{});
  groups();
  two_models();
  Trainer trainer(model);
  factory();
  untraced(y.sum());
  unique_model();
  two_phases();
  return 0;
}

// Migrated code with a second optimizer the setup does not name: reported.
// RUN: %migrate %S/Inputs/setup-forgotten.cpp -- %flags > %t.forgotten.cpp 2> %t.forgotten.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.forgotten.err --check-prefix=FORGOTTEN
// RUN: diff %S/Inputs/setup-forgotten.cpp %t.forgotten.cpp
// FORGOTTEN: setup-forgotten.cpp:12:3: warning: optimizer over a set-up model that fabric.setup does not name{{.*}}[fabric-setup]
// FORGOTTEN-NOT: warning

// Two training phases over one model, each with its own optimizer (LoRA
// adapters first, then every parameter): the model is set up with the first
// optimizer before its first step, the second optimizer where it is made.
// Set up together after the second, the first phase would train
// unsynchronised copies.
// CHECK-LABEL: {{^}}void two_phases(
// CHECK: {{^  }}torch::optim::SGD adapters_opt(adapters, torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^  }}fabric.setup(model, adapters_opt);
// CHECK-NEXT: {{^  }}run_phase(fabric, model, adapters_opt);
// CHECK: {{^  }}torch::optim::SGD full_opt(model->parameters(), torch::optim::SGDOptions(0.01));
// CHECK-NEXT: {{^  }}fabric.setup_optimizer(full_opt);
// CHECK-NEXT: {{^  }}run_phase(fabric, model, full_opt);
void run_phase(Net& model, torch::optim::Optimizer& optimizer) {
  torch::Tensor loss = model->forward(torch::ones({2})).sum();
  loss.backward();
  optimizer.step();
}
void two_phases() {
  Net model;
  std::vector<torch::Tensor> adapters;
  for (auto& p : model->parameters()) adapters.push_back(p);
  torch::optim::SGD adapters_opt(adapters, torch::optim::SGDOptions(0.1));
  run_phase(model, adapters_opt);
  for (auto& p : model->parameters()) p.requires_grad_(true);
  torch::optim::SGD full_opt(model->parameters(), torch::optim::SGDOptions(0.01));
  run_phase(model, full_opt);
}
