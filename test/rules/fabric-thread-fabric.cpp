// The Fabric is threaded into a Trainer that lives in its own header and
// source: member, constructor parameter (declaration and definition), member
// initialiser, and the argument where main constructs it. The other rules
// then use the member. Migrating the result again changes nothing.
// RUN: rm -rf %t && mkdir -p %t && cp -r %S/Inputs/thread-fabric %t/project
// RUN: %fabricize %t/project/trainer.cpp %t/project/main.cpp -o %t/out -- %flags
// RUN: FileCheck %s --input-file=%t/out/trainer.h --check-prefix=HEADER
// RUN: FileCheck %s --input-file=%t/out/trainer.cpp --check-prefix=SOURCE
// RUN: FileCheck %s --input-file=%t/out/main.cpp --check-prefix=MAIN
// RUN: %fabricize %t/out/trainer.cpp %t/out/main.cpp -o %t/again -- %flags 2>&1 | FileCheck %s --check-prefix=AGAIN
// RUN: diff %t/out/trainer.cpp %t/again/trainer.cpp
// RUN: diff %t/out/main.cpp %t/again/main.cpp
// RUN: diff %t/out/trainer.h %t/again/trainer.h
// AGAIN-NOT: trainer.h
// AGAIN: main.cpp: 0 edits
// AGAIN-NEXT: trainer.cpp: 0 edits
//
// HEADER: #include <torch/torch.h>
// HEADER-NEXT: #include <fabric/fabric.h>
// HEADER: {{^  }}Trainer(fabric::Fabric& fabric, Net model, torch::optim::Optimizer& optimizer);
// HEADER: {{^ }}private:
// HEADER-NEXT: {{^  }}fabric::Fabric& fabric_;
// HEADER-NEXT: {{^  }}Net model_;
//
// SOURCE: {{^}}Trainer::Trainer(fabric::Fabric& fabric, Net model, torch::optim::Optimizer& optimizer)
// SOURCE-NEXT: {{^    }}: fabric_(fabric), model_(model), optimizer_(optimizer) {}
// SOURCE: {{^  }}fabric_.backward(loss);
// SOURCE: {{^  }}fabric_.print() << "loss "
//
// MAIN: {{^  }}fabric::Fabric fabric(
// MAIN: {{^  }}fabric.launch();
// MAIN: {{^  }}fabric.setup(model, optimizer);
// MAIN-NEXT: {{^  }}Trainer trainer(fabric, model, optimizer);

// A class constructed with no arguments (`Classifier clf;`, `new
// Classifier;`) gets the Fabric where it is constructed too.
// RUN: %migrate %S/Inputs/thread-default-construct.cpp -- %flags > %t.default.cpp 2> %t.default.err
// An aggregate whose optimizer comes from outside (Stepper) is no finding.
// RUN: not grep aggregate %t.default.err
// RUN: FileCheck %s --input-file=%t.default.cpp --check-prefix=DEFAULT
// RUN: %migrate %t.default.cpp -- %flags | diff -u %t.default.cpp -
// DEFAULT: {{^}}Classifier::Classifier(fabric::Fabric& fabric) : fabric_(fabric), optimizer_(
// DEFAULT: {{^}}struct Stepper {
// DEFAULT-NEXT: {{^}}  fabric::Fabric& fabric;
// DEFAULT: {{^}}  Classifier clf(fabric);
// DEFAULT-NEXT: {{^}}  Classifier* other = new Classifier(fabric);
// DEFAULT: {{^}}  Stepper stepper{fabric, net, &sgd};

// A class that declares no constructor (default member initialisers make
// its model and optimizer) gets one that takes the Fabric and sets them up:
// in its public section, or the top of the class when it has none before
// its members; a constructor of the class's own sets up what a default
// member initialiser made; an aggregate that makes its optimizer so has no
// constructor to set it up in: reported, never a silent copy per rank.
// RUN: %fabricize --stdout %S/Inputs/thread-member-initialisers.cpp -- %flags > %t.nsdmi.cpp 2> %t.nsdmi.err; test $? -eq 1
// RUN: FileCheck %s --check-prefix=NSDMI --input-file=%t.nsdmi.cpp
// RUN: FileCheck %s --check-prefix=NSDMI-MSG --input-file=%t.nsdmi.err
// RUN: %migrate %t.nsdmi.cpp -- %flags > %t.nsdmi.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.nsdmi.cpp %t.nsdmi.again.cpp
// NSDMI: {{^}}class Trainer {{{$}}
// NSDMI-NEXT: {{^}} public:{{$}}
// NSDMI-NEXT: {{^}}  explicit Trainer(fabric::Fabric& fabric) : fabric_(fabric) {{{$}}
// NSDMI-NEXT: {{^}}    fabric_.setup(model_, optimizer_);{{$}}
// NSDMI-NEXT: {{^}}  }{{$}}
// NSDMI-NEXT: {{^}}  void train(int steps) {{{$}}
// NSDMI: {{^}}  fabric::Fabric& fabric_;{{$}}
// NSDMI-NEXT: {{^}}  Net model_;{{$}}
// NSDMI: {{^}}class Quiet {{{$}}
// NSDMI-NEXT: {{^}}  fabric::Fabric& fabric_;{{$}}
// NSDMI: {{^}} public:{{$}}
// NSDMI-NEXT: {{^}}  explicit Quiet(fabric::Fabric& fabric) : fabric_(fabric) {{{$}}
// NSDMI-NEXT: {{^}}    fabric_.setup(model_, *optimizer_);{{$}}
// NSDMI: {{^}}  explicit Configured(fabric::Fabric& fabric, int epochs) : fabric_(fabric), epochs_(epochs) {{{$}}
// NSDMI-NEXT: {{^}}    fabric_.setup(model_, optimizer_);{{$}}
// NSDMI-NEXT: {{^}}  }{{$}}
// NSDMI: {{^}}class Defaulted {{{$}}
// NSDMI-NEXT: {{^}} public:{{$}}
// NSDMI-NEXT: {{^}}  explicit Defaulted(fabric::Fabric& fabric) : fabric_(fabric) {{{$}}
// NSDMI-NEXT: {{^}}    fabric_.setup(model_, optimizer_);{{$}}
// NSDMI-NEXT: {{^}}  }{{$}}
// NSDMI-NEXT: {{^}}  void step() {{{$}}
// NSDMI: {{^}}  fabric.launch();{{$}}
// NSDMI-NEXT: {{^}}  Trainer trainer(fabric);{{$}}
// NSDMI: {{^}}  auto quiet = std::make_unique<Quiet>(fabric);{{$}}
// NSDMI: {{^}}  Configured configured(fabric, 2);{{$}}
// NSDMI: {{^}}  Defaulted defaulted(fabric);{{$}}
// NSDMI: {{^}}  Bundle bundle{fabric};{{$}}
// NSDMI-MSG: thread-member-initialisers.cpp:80:1: warning: this aggregate's default member initialisers make an optimizer over its model, and it has no constructor to set them up in{{.*}}[fabric-setup]
// NSDMI-MSG-NOT: thread-member-initialisers.cpp:{{.*}}: {{(warning|error)}}

// Lambdas: `[&]` reaches the Fabric parameter its function gets; a lambda
// capturing by name gets `&fabric` added to its captures (and a lambda
// around it too), `this` in a class that holds the Fabric; a capture list a
// macro writes is reported (an error: its training is not migrated) and
// left as it was.
// RUN: %fabricize --stdout %S/Inputs/thread-lambda.cpp -- %flags > %t.lambda.cpp 2> %t.lambda.err; test $? -eq 1
// RUN: FileCheck %s --check-prefix=LAMBDA --input-file=%t.lambda.cpp
// RUN: FileCheck %s --check-prefix=LAMBDA-MSG --input-file=%t.lambda.err
// LAMBDA: {{^}}void train_by_reference(fabric::Fabric& fabric, torch::nn::Linear& model,
// LAMBDA: {{^}}  auto step = [&](int64_t i) {{{$}}
// LAMBDA: {{^}}    fabric.backward(loss);{{$}}
// LAMBDA-NEXT: {{^}}    fabric.step(optimizer);{{$}}
// LAMBDA: {{^}}void loss_display(fabric::Fabric& fabric, int step, float loss) { fabric.print() << "step "
// LAMBDA: {{^}}void train_by_name(fabric::Fabric& fabric, torch::nn::Linear& model,
// LAMBDA: {{^}}  auto step = [&model, &optimizer, count, &fabric](const torch::Tensor& batch) {{{$}}
// LAMBDA: {{^}}    fabric.backward(loss);{{$}}
// LAMBDA-NEXT: {{^}}    fabric.step(optimizer);{{$}}
// LAMBDA-NEXT: {{^}}    auto show = [count, &loss, &fabric]() { loss_display(fabric, count, loss.item<float>()); };{{$}}
// LAMBDA: {{^}}  fabric::Fabric& fabric;{{$}}
// LAMBDA: {{^}}    auto step = [&x, this](torch::nn::Linear& net, torch::optim::Optimizer& opt) {{{$}}
// LAMBDA: {{^}}      fabric.backward(loss);{{$}}
// LAMBDA-NEXT: {{^}}      fabric.step(opt);{{$}}
// LAMBDA: {{^}}void train_in_macro(torch::nn::Linear& model,
// LAMBDA: {{^}}  auto step = CAPTURES(const torch::Tensor& batch) {{{$}}
// LAMBDA: {{^}}    loss.backward();{{$}}
// LAMBDA: {{^}}  train_by_reference(fabric, model, optimizer, x);{{$}}
// LAMBDA-NEXT: {{^}}  train_by_name(fabric, model, optimizer, x);{{$}}
// LAMBDA-NEXT: {{^}}  Trainer trainer{fabric};{{$}}
// LAMBDA: {{^}}  train_in_macro(model, optimizer, x);{{$}}
// LAMBDA-MSG: thread-lambda.cpp:51:5: error: not migrated (backward through the Fabric{{.*}}`the lambda at thread-lambda.cpp:49` captures by name and not the Fabric, in a macro: capture it (`[&]` or `&fabric`)
// LAMBDA-MSG-NOT: {{^[^f].*}}error:

// A trainer class template of the project's own inside `namespace torch`.
// RUN: %fabricize --stdout %S/Inputs/thread-namespace-torch.cpp -- %flags > %t.torchns.cpp 2> %t.torchns.err
// RUN: FileCheck %s --check-prefix=TORCHNS --input-file=%t.torchns.cpp
// TORCHNS: {{^}}  Trainer(fabric::Fabric& fabric, TaskFactory factory, double lr)
// TORCHNS-NEXT: {{^}}      : fabric_(fabric), factory_(factory),
// TORCHNS-NEXT: {{^}}    fabric_.setup(model_, optimizer_);
// TORCHNS: {{^}}      fabric_.backward(loss);
// TORCHNS-NEXT: {{^}}      fabric_.step(optimizer_);
// TORCHNS: {{^}}  fabric::Fabric& fabric_;
// TORCHNS: {{^}}  torch::Trainer<Task> trainer(fabric, Task{}, 0.1);

// Functions: train() declared in a header, defined in its source and called
// from main gets a `fabric::Fabric&` parameter at every declaration, and the
// Fabric at every call; so does the helper it calls, and a factory that makes
// a Trainer through std::make_unique. A function used as a callback cannot
// get it: what needed it there is an error finding, left as it was.
// RUN: %migrate %S/Inputs/thread-labelled-arguments.cpp -- %flags > %t.labelled.cpp
// RUN: FileCheck %s --check-prefix=LABELLED --input-file=%t.labelled.cpp
// LABELLED: {{^}}void report(fabric::Fabric& fabric, /*epoch=*/int epoch, double loss) {
// LABELLED: {{^}}  explicit Trainer(fabric::Fabric& fabric, torch::nn::Linear model) : fabric_(fabric), model_(model), optimizer_(model_->parameters(), 0.1) {{{$}}
// LABELLED: {{^}}    report(fabric, /*epoch=*/epoch, /*loss=*/loss.item<double>());{{$}}
// LABELLED: {{^}}  CHECKED(Trainer trainer(fabric, model));{{$}}
// A trainer class hierarchy (issue 39): the base that holds the optimizer
// (made by its own factory) keeps the Fabric; each derived constructor
// takes it and hands it to its base (a written base initialiser, one level
// further down, an inherited constructor, a mixin left alone); the virtual
// overrides use the base's member. A base whose members are private still
// needs the Fabric from its derived constructor.
// RUN: rm -rf %t.hier && mkdir -p %t.hier && cp -r %S/Inputs/thread-hierarchy %t.hier/project
// RUN: %fabricize %t.hier/project/base_trainer.cpp %t.hier/project/tasks.cpp %t.hier/project/main.cpp -o %t.hier/out -- %flags 2> %t.hier/err
// RUN: FileCheck %s --input-file=%t.hier/out/base_trainer.cpp --check-prefix=HIER-BASE
// RUN: FileCheck %s --input-file=%t.hier/out/tasks.h --check-prefix=HIER-TASKS-H
// RUN: FileCheck %s --input-file=%t.hier/out/tasks.cpp --check-prefix=HIER-TASKS
// RUN: FileCheck %s --input-file=%t.hier/out/main.cpp --check-prefix=HIER-MAIN
// RUN: FileCheck %s --input-file=%t.hier/err --check-prefix=HIER-ERR --allow-empty
// RUN: %fabricize %t.hier/out/base_trainer.cpp %t.hier/out/tasks.cpp %t.hier/out/main.cpp -o %t.hier/again -- %flags 2> /dev/null
// RUN: diff -r %t.hier/out %t.hier/again
//
// HIER-BASE: {{^}}BaseTrainer::BaseTrainer(fabric::Fabric& fabric, Net model, double lr) : fabric_(fabric), model_(model) {
// HIER-BASE-NEXT: {{^}}  optimizer_ = make_optimizer(lr);
// HIER-BASE-NEXT: {{^}}  fabric_.setup(model_, *optimizer_);
// HIER-BASE: {{^}}  for (int epoch = 0; epoch < epochs; ++epoch) fabric_.print() << "loss "
// HIER-TASKS-H: {{^}}  ClassifierTrainer(fabric::Fabric& fabric, Net model, double lr);
// HIER-TASKS-H: {{^}}  using BaseTrainer::BaseTrainer;
// HIER-TASKS-H: {{^}}  explicit FineTuner(fabric::Fabric& fabric, Net model) : ClassifierTrainer(fabric, model, 0.01) {}
// HIER-TASKS-H: {{^}}  explicit Unsealed(fabric::Fabric& fabric, Net model) : Sealed(fabric, model) {}
// HIER-TASKS-H: {{^}}  TwoOptimizers(fabric::Fabric& fabric, Net model, Net head) : fabric_(fabric), BaseTrainer(fabric, model, 0.1), head_(head), head_optimizer_(head_->parameters(), 0.01) {
// HIER-TASKS-H: {{^}}  WarmupLR(torch::optim::Optimizer& optimizer, int warmup) : LRScheduler(optimizer), warmup_(warmup) {}
// HIER-TASKS: {{^}}ClassifierTrainer::ClassifierTrainer(fabric::Fabric& fabric, Net model, double lr) : BaseTrainer(fabric, model, lr), Named("classify") {}
// HIER-TASKS: {{^}}double ClassifierTrainer::train_epoch() {
// HIER-TASKS: {{^}}  fabric_.backward(loss);
// HIER-TASKS-NEXT: {{^}}  fabric_.step(*optimizer_);
// HIER-TASKS: {{^}}double RegressorTrainer::train_epoch() {
// HIER-TASKS: {{^}}  fabric_.backward(loss);
// HIER-TASKS-NEXT: {{^}}  fabric_.step(*optimizer_);
// HIER-MAIN: {{^}}  auto classifier = std::make_unique<ClassifierTrainer>(fabric, Net(), 0.1);
// HIER-MAIN: {{^}}  RegressorTrainer regressor(fabric, Net(), 0.05);
// HIER-MAIN: {{^}}  FineTuner tuner{fabric, Net()};
// HIER-MAIN: {{^}}  Unsealed unsealed(fabric, Net{});
// HIER-MAIN: {{^}}  TwoOptimizers two(fabric, Net{}, Net{});
// HIER-MAIN: {{^}}  WarmupLR warmup(plain, 10);
// HIER-ERR-NOT: error
// RUN: rm -rf %t.fn && mkdir -p %t.fn && cp -r %S/Inputs/thread-functions %t.fn/project
// RUN: %fabricize %t.fn/project/train.cpp %t.fn/project/main.cpp -o %t.fn/out -- %flags 2> %t.fn/err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.fn/out/train.h --check-prefix=FN-HEADER
// RUN: FileCheck %s --input-file=%t.fn/out/train.cpp --check-prefix=FN-SOURCE
// RUN: FileCheck %s --input-file=%t.fn/out/main.cpp --check-prefix=FN-MAIN
// RUN: FileCheck %s --input-file=%t.fn/err --check-prefix=FN-ERR
// RUN: %fabricize %t.fn/out/train.cpp %t.fn/out/main.cpp -o %t.fn/again -- %flags 2> /dev/null; test $? -eq 1
// RUN: diff -r %t.fn/out %t.fn/again
//
// FN-HEADER: {{^}}void train(fabric::Fabric& fabric, Net& model, torch::optim::Optimizer& optimizer, int epochs = 1);
// FN-HEADER: {{^}}double evaluate(fabric::Fabric& fabric, Net& model);
// FN-HEADER: {{^}}double probe(Net& model);
// FN-HEADER: {{^}}  explicit Trainer(fabric::Fabric& fabric, Net model);
// FN-HEADER: {{^}}  fabric::Fabric& fabric_;
// FN-HEADER: {{^}}std::unique_ptr<Trainer> make_trainer(fabric::Fabric& fabric, Net model);
//
// FN-SOURCE: {{^}}torch::Tensor step(fabric::Fabric& fabric, Net& model, torch::optim::Optimizer& optimizer) {
// FN-SOURCE: {{^}}  fabric.backward(loss);
// FN-SOURCE-NEXT: {{^}}  fabric.step(optimizer);
// FN-SOURCE: {{^}}void train(fabric::Fabric& fabric, Net& model, torch::optim::Optimizer& optimizer, int epochs) {
// FN-SOURCE: {{^}}    auto loss = step(fabric, model, optimizer);
// FN-SOURCE-NEXT: {{^}}    fabric.print() << "epoch "
// FN-SOURCE: {{^}}double evaluate(fabric::Fabric& fabric, Net& model) {
// FN-SOURCE: {{^}}double probe(Net& model) {
// FN-SOURCE-NEXT: {{^}}  auto loss
// FN-SOURCE-NEXT: {{^}}  loss.backward();
// FN-SOURCE: {{^}}Trainer::Trainer(fabric::Fabric& fabric, Net model)
// FN-SOURCE-NEXT: {{^}}    : fabric_(fabric), model_(model), optimizer_(std::make_unique<torch::optim::Adam>(model_->parameters())) {
// FN-SOURCE-NEXT: {{^}}  fabric_.setup(model_, *optimizer_);
// FN-SOURCE-NEXT: {{^}}}
// FN-SOURCE: {{^}}  fabric_.step(*optimizer_);
// FN-SOURCE: {{^}}std::unique_ptr<Trainer> make_trainer(fabric::Fabric& fabric, Net model) { return std::make_unique<Trainer>(fabric, model); }
//
// FN-MAIN: {{^}}  train(fabric, model, optimizer, 2);
// FN-MAIN-NEXT: {{^}}  evaluate(fabric, model);
// FN-MAIN-NEXT: {{^}}  std::function<double(Net&)> callback = probe;
// FN-MAIN: {{^}}  auto trainer = make_trainer(fabric, model);
//
// FN-ERR: train.cpp:31:3: error: not migrated (backward through the Fabric{{.*}}): `probe` is used other than by a call at main.cpp:10{{.*}}[fabric-backward]
