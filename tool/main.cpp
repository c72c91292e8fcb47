// fabricize: migrates single-device LibTorch code to fabric::Fabric.
//
//   fabricize [migrate] <sources...> [options]   MigrateCommand.cpp (the default)
//   fabricize lint <files or directories...>     LintCommand.cpp
//   fabricize lsp                                LspCommand.cpp
//   fabricize verify <sources or -p build/>      VerifyCommand.cpp
//
// This file only picks the subcommand. Each subcommand is its own file over
// the shared layers (compile commands and project, engine setup, findings,
// engine, catalogue, edits, outputs); none calls another (test/tool/
// check_layers.py checks both).
#include "lint/LintCommand.h"
#include "lsp/LspCommand.h"
#include "migrate/MigrateCommand.h"
#include "verify/VerifyCommand.h"

#include <llvm/Support/Signals.h>

#include <string>

int main(int argc, const char** argv) {
  // A crash prints a stack trace. Registering LLVM's signal handlers here,
  // on the main thread, also gives the alternate signal stack they install to
  // this thread: registered first from an lsp worker (Clang does so when it
  // creates an output file), that worker got a malloc'd signal stack which
  // AddressSanitizer then failed to unmap when the worker exited.
  llvm::sys::PrintStackTraceOnErrorSignal(argv[0]);
  if (argc > 1 && std::string(argv[1]) == "lint") return fabricize::runLint(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "lsp") return fabricize::runLsp(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "verify") return fabricize::runVerify(argc - 1, argv + 1);
  return fabricize::runMigrate(argc, argv);
}
