// Third-party code a project carries is never edited or reported on: a
// header under third_party/ (a command-line parser whose usage() prints with
// a `std::ostream& out = std::cout` default argument), and a single-header
// library copied into include/ (a license grant, no LibTorch). Only the
// project's own training code is migrated, and a default argument is not a
// print.
// RUN: rm -rf %t && mkdir -p %t && cp -r %S/Inputs/vendored %t/project
// RUN: %fabricize %t/project/train.cpp --root %t/project -o %t/out -- %flags -I%t/project/third_party -I%t/project/include 2> %t/err; test $? -le 1
// RUN: not grep -F "third_party" %t/err
// RUN: not grep -F "tinyjson.hpp" %t/err
// RUN: FileCheck %s --input-file=%t/err
// CHECK: fabricize: train.cpp: {{[0-9]+}} edits
// RUN: diff %t/project/third_party/flags/flags.hpp %t/out/third_party/flags/flags.hpp
// RUN: diff %t/project/include/tinyjson.hpp %t/out/include/tinyjson.hpp
// RUN: FileCheck %s --input-file=%t/out/train.cpp --check-prefix=TRAIN
// TRAIN: fabric.backward(loss);
// TRAIN: fabric.print() << "loss "
// A call into it that writes a file is made on rank 0 (the library itself
// is not edited).
// TRAIN: if (fabric.is_global_zero()) tinyjson::write("metrics.json", "loss", loss.item<double>());
// TRAIN-NEXT: if (!(!fabric.is_global_zero() || tinyjson::save("loss.txt", loss.item<double>()))) std::cerr
//
// The same header in the project's own folder, without a license grant, is
// the project's: its default argument still stays as it is.
// RUN: cp %t/project/third_party/flags/flags.hpp %t/project/flags_own.hpp
// RUN: sed -i 's|"flags/flags.hpp"|"flags_own.hpp"|' %t/project/train.cpp
// RUN: %fabricize %t/project/train.cpp --root %t/project -o %t/out2 -- %flags -I%t/project/include 2> %t/err2; test $? -le 1
// RUN: FileCheck %s --input-file=%t/out2/flags_own.hpp --check-prefix=OWN
// OWN: inline void usage(const std::string& program, std::ostream& out = std::cout) {
