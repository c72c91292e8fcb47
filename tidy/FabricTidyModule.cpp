// The clang-tidy module: one check per rule of the fabricize catalogue,
// loaded with `clang-tidy --load=libfabric_tidy.so --checks='-*,fabric-*'`.
// See docs/tidy.md.
#include "CatalogueCheck.h"
#include "Rule.h"

#include "clang-tidy/ClangTidyModule.h"
#include "clang-tidy/ClangTidyModuleRegistry.h"

namespace fabricize::tidy {

class FabricTidyModule : public clang::tidy::ClangTidyModule {
 public:
  void addCheckFactories(clang::tidy::ClangTidyCheckFactories& factories) override {
    // The ids come from the catalogue itself; each check builds its rule
    // from the catalogue again with its own options.
    for (const Rule& rule : buildCatalogue(FabricOptions())) factories.registerCheck<CatalogueCheck>(rule.id);
  }
};

// Registration into the clang-tidy executable's module registry: its
// symbols are exported, so this resolves against the loading binary.
static clang::tidy::ClangTidyModuleRegistry::Add<FabricTidyModule> registration(
    "fabric-module", "Checks that migrate LibTorch code to fabric::Fabric (fabricize).");

}  // namespace fabricize::tidy

// For a clang-tidy that links this module statically rather than loading it.
volatile int FabricTidyModuleAnchorSource = 0;
