// Threading the Fabric through calls.
//
// Many rules write `fabric.<something>`: that needs a Fabric where the edit
// lands. main has one (fabric-insert), a Trainer holding an optimizer gets
// one as a member (fabric-thread-fabric); any other function — a train()
// called from main, a train_step() called from train() — gets a
// `fabric::Fabric& fabric` parameter, and every call passes its own Fabric,
// but only when every caller has or gets one. That is known only once every
// translation unit of the project has been matched (train() is defined in
// train.cpp, called from main.cpp), so the rules do not decide it:
//  - an edit that uses the Fabric of a function that has none records a
//    Need for that function (fabricNameAt() does, while the engine's
//    NeedRecorder listens);
//  - fabric-thread-fabric's edits for functions (the parameter at each
//    declaration, the argument at each call) carry a Fact as their metadata;
//  - resolve() then decides, for the whole project, which functions get the
//    Fabric, and which matches can be applied. A match that needs a function
//    that cannot get one is not applied: it becomes a finding saying why.
// The tool's engine resolves across translation units, the clang-tidy
// plugin within one.
#pragma once

#include "clang/AST/Decl.h"

#include <string>
#include <vector>

namespace fabricize::threading {

// A function whose Fabric an edit uses.
struct Need {
  std::string function;  // key (functionKey), or a pseudo-key for a place without a function
  std::string name;      // as a person names it: "train", "Trainer::fit"
  std::string blocked;   // why it can never get one ("is virtual"); empty when it can
  // The edit writes the Fabric's name; otherwise it only assumes the
  // function is migrated (a removed `.to(device)` relies on fabric.setup)
  // and is simply not applied when the function gets no Fabric.
  bool uses = true;
};

// What one fabric-thread-fabric edit means to resolve(), carried as the
// edit's metadata.
struct Fact {
  enum Kind {
    Parameter,   // the edit adds the Fabric parameter to a declaration of `function`
    Argument,    // the edit passes the Fabric at a call of `function`
    Declare,     // the edit declares the Fabric in `function` (a main without LibTorch of its own)
    Blocks,      // no edit: `function` cannot take a parameter (reason says why)
    Optional,    // no function: if the match cannot be applied, it is left without a finding
    Standalone,  // no function: the edit is right whether or not its function gets the Fabric
    // No function: the match makes `function` (a pseudo key, not a
    // function) true for the whole project, so matches elsewhere that need
    // it apply (a loop in main.cpp over a loader class that
    // fabric-shard-loader-class shards in dataloader.cpp).
    Provides,
  };
  Kind kind = Parameter;
  std::string function;
  std::string name;
  bool definition = false;  // Parameter: this declaration is the definition
  std::string reason;       // Blocks
  bool external = false;    // Parameter: the function has external linkage
};

// The key of a function: its USR, of the template pattern for an
// instantiation (edits land in the pattern's text).
std::string functionKey(const clang::FunctionDecl& function);
// How messages name it: "train", "Trainer::fit".
std::string displayName(const clang::FunctionDecl& function);

// Why `function` can never take a Fabric parameter, or "".
std::string blockedReason(const clang::FunctionDecl& function);

// Collects the Needs recorded on this thread while it lives (the engine
// wraps each match's edit evaluation in one).
// A lambda that captures by name (`[this, &x]`) and whose body an edit
// makes name the Fabric: the capture to add, inserted at `at` (before the
// capture list's `]`). It belongs to the match whose edit needs it.
struct Capture {
  clang::SourceLocation at;
  std::string text;  // ", &fabric", "&fabric", ", this"
};

class NeedRecorder {
 public:
  NeedRecorder();
  ~NeedRecorder();
  NeedRecorder(const NeedRecorder&) = delete;
  NeedRecorder& operator=(const NeedRecorder&) = delete;
  std::vector<Need> needs;
  std::vector<Capture> captures;

 private:
  NeedRecorder* previous_;
};
// Records `need` with the innermost live recorder of this thread, if any.
void recordNeed(Need need);
// Records `capture` likewise (once per place).
void recordCapture(Capture capture);

// One match as resolve() sees it.
struct MatchNeeds {
  std::vector<Need> needs;
  std::vector<Fact> facts;
};

struct Verdict {
  bool applied = true;
  // Not applied, and a person must know: the edits wrote the Fabric in a
  // function that cannot get it (`reason` says why: "`train_step` gets no
  // Fabric: its address is taken at model.cpp:40"). Edits that only assumed
  // a migrated function, threading edits that turned out unneeded, and
  // Optional matches are dropped without a report.
  bool report = false;
  std::string reason;
  // The function does not run in this program (nothing calls it: shared
  // code another project uses): reported, but it cannot make the ranks
  // train unsynchronised copies.
  bool neverRuns = false;
};

// What a person reads about a match that was not applied:
// "not migrated (<explanation>): <reason>; <what to do>".
std::string notMigratedMessage(const std::string& explanation, const Verdict& verdict);

// Whether the match is fabric-thread-fabric's for a function (a means to
// other edits, never worth a report of its own).
bool isThreadingEdit(const MatchNeeds& match);

// `wholeProgram`: the matched code includes main, so every call of a
// function is among the matches, and a function nothing calls is dead code
// (its training code is reported). Otherwise (one file of a project in an
// editor, `fabricize src/train.cpp`), a function with external linkage and
// no call in sight is assumed to be called elsewhere, and gets the Fabric.
std::vector<Verdict> resolve(const std::vector<MatchNeeds>& matches, bool wholeProgram = true);

}  // namespace fabricize::threading
