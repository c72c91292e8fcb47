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
