#include "rule-helpers/Threading.h"

#include "clang/AST/DeclCXX.h"
#include "clang/Index/USRGeneration.h"
#include "llvm/ADT/SmallString.h"

#include <map>
#include <set>

namespace fabricize::threading {

using namespace clang;

namespace {

const FunctionDecl& patternOf(const FunctionDecl& function) {
  const FunctionDecl* current = &function;
  // A member of a class template instantiated inside another: walk to the
  // written declaration.
  while (const FunctionDecl* pattern = current->getTemplateInstantiationPattern()) {
    if (pattern == current) break;
    current = pattern;
  }
  return *current;
}

thread_local NeedRecorder* activeRecorder = nullptr;

}  // namespace

std::string functionKey(const FunctionDecl& function) {
  const FunctionDecl& pattern = patternOf(function);
  llvm::SmallString<128> usr;
  if (index::generateUSRForDecl(&pattern, usr)) return "fn:" + pattern.getQualifiedNameAsString();
  return std::string(usr);
}

std::string displayName(const FunctionDecl& function) { return patternOf(function).getQualifiedNameAsString(); }

std::string blockedReason(const FunctionDecl& function) {
  const FunctionDecl& pattern = patternOf(function);
  if (isa<CXXConstructorDecl>(pattern))
    return "is a constructor of a class that holds no optimizer (the Fabric is threaded into "
           "classes that hold one)";
  if (isa<CXXDestructorDecl>(pattern)) return "is a destructor";
  if (isa<CXXConversionDecl>(pattern) || pattern.isOverloadedOperator()) return "is an operator";
  if (const auto* method = dyn_cast<CXXMethodDecl>(&pattern)) {
    if (method->isVirtual()) return "is virtual (a parameter added to one override would have to be added to all)";
    if (method->getParent()->isLambda()) return "is a lambda outside any function";
  }
  return "";
}

NeedRecorder::NeedRecorder() : previous_(activeRecorder) { activeRecorder = this; }
NeedRecorder::~NeedRecorder() { activeRecorder = previous_; }

void recordNeed(Need need) {
  if (!activeRecorder) return;
  for (const Need& seen : activeRecorder->needs)
    if (seen.function == need.function) return;
  activeRecorder->needs.push_back(std::move(need));
}

void recordCapture(Capture capture) {
  if (!activeRecorder) return;
  for (const Capture& seen : activeRecorder->captures)
    if (seen.at == capture.at) return;
  activeRecorder->captures.push_back(std::move(capture));
}

namespace {

struct FunctionInfo {
  std::string name;
  std::string blocked;        // from a Need or a Blocks fact
  bool canDeclare = false;    // main: declares its own Fabric
  bool defined = false;       // a Parameter fact on its definition
  bool external = false;      // external linkage: callable from code not matched
  bool declared = false;      // any Parameter fact
  std::vector<size_t> calls;  // matches passing the Fabric to it
  bool wanted = false;        // a non-threading edit uses its Fabric
  bool provided = false;      // a Provides fact: a project-wide condition that holds
};

}  // namespace

bool isThreadingEdit(const MatchNeeds& match) {
  for (const Fact& fact : match.facts)
    if (fact.kind == Fact::Parameter || fact.kind == Fact::Argument || fact.kind == Fact::Declare) return true;
  return false;
}

std::string notMigratedMessage(const std::string& explanation, const Verdict& verdict) {
  return "not migrated (" + explanation + "): " + verdict.reason +
         (verdict.neverRuns ? "; it does not run in this program: when something calls it, pass it the Fabric"
                            : "; give it the Fabric by hand, or restructure");
}

std::vector<Verdict> resolve(const std::vector<MatchNeeds>& matches, bool wholeProgram) {
  std::map<std::string, FunctionInfo> functions;
  auto info = [&](const std::string& key, const std::string& name) -> FunctionInfo& {
    FunctionInfo& f = functions[key];
    if (f.name.empty()) f.name = name;
    return f;
  };
  for (size_t i = 0; i < matches.size(); ++i) {
    const MatchNeeds& match = matches[i];
    bool threading = isThreadingEdit(match);
    for (const Need& need : match.needs) {
      FunctionInfo& f = info(need.function, need.name);
      if (!need.blocked.empty() && f.blocked.empty()) f.blocked = need.blocked;
      if (!threading && need.uses) f.wanted = true;
    }
    for (const Fact& fact : match.facts) {
      if (fact.kind == Fact::Optional || fact.kind == Fact::Standalone) continue;
      FunctionInfo& f = info(fact.function, fact.name);
      switch (fact.kind) {
        case Fact::Parameter:
          f.declared = true;
          f.defined = f.defined || fact.definition;
          f.external = f.external || fact.external;
          break;
        case Fact::Argument:
          f.calls.push_back(i);
          break;
        case Fact::Declare:
          f.canDeclare = true;
          break;
        case Fact::Blocks:
          if (f.blocked.empty()) f.blocked = fact.reason;
          break;
        case Fact::Provides:
          f.provided = true;
          break;
        case Fact::Optional:
        case Fact::Standalone:
          break;
      }
    }
  }

  // Which functions can have the Fabric: main (it declares one), and any
  // other function that can take the parameter and whose callers all can.
  std::map<std::string, std::string> whyNot;  // key -> reason, for those that cannot
  std::set<std::string> dead;  // those that do not run in this program: nothing calls them, or only dead code
  for (auto& [key, f] : functions) {
    if (f.canDeclare || f.provided) continue;
    if (!f.blocked.empty())
      whyNot[key] = "`" + f.name + "` " + f.blocked;
    else if (!f.declared || !f.defined)
      whyNot[key] = "`" + f.name + "` is not defined in the project";
    else if (f.calls.empty() && (wholeProgram || !f.external)) {
      whyNot[key] = "nothing in the project calls `" + f.name + "`";
      dead.insert(key);
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [key, f] : functions) {
      if (f.canDeclare || whyNot.count(key)) continue;
      for (size_t call : f.calls)
        for (const Need& caller : matches[call].needs)
          if (caller.function != key && whyNot.count(caller.function) && !whyNot.count(key)) {
            std::string reason = whyNot[caller.function];
            whyNot[key] =
                "`" + f.name + "` is called from `" + caller.name + "`, which gets no Fabric (" + reason + ")";
            if (dead.count(caller.function)) dead.insert(key);
            changed = true;
          }
    }
  }

  // Which of those get it: the ones whose own edits use it, and the callers
  // that must pass it on.
  std::map<std::string, std::vector<std::string>> callees;  // caller -> functions it passes the Fabric to
  for (const MatchNeeds& match : matches)
    for (const Fact& fact : match.facts)
      if (fact.kind == Fact::Argument)
        for (const Need& caller : match.needs) callees[caller.function].push_back(fact.function);
  std::set<std::string> threaded;
  for (const auto& [key, f] : functions)
    if (f.provided) threaded.insert(key);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [key, f] : functions) {
      if (whyNot.count(key) || threaded.count(key)) continue;
      bool needed = f.wanted;
      for (const std::string& callee : callees[key]) needed = needed || threaded.count(callee);
      if (needed) {
        threaded.insert(key);
        changed = true;
      }
    }
  }

  std::vector<Verdict> verdicts(matches.size());
  for (size_t i = 0; i < matches.size(); ++i) {
    const MatchNeeds& match = matches[i];
    Verdict& verdict = verdicts[i];
    bool optional = false;
    for (const Fact& fact : match.facts) {
      optional = optional || fact.kind == Fact::Optional;
      if ((fact.kind == Fact::Parameter || fact.kind == Fact::Argument || fact.kind == Fact::Declare) &&
          !threaded.count(fact.function))
        verdict.applied = false;
    }
    for (const Need& need : match.needs) {
      if (threaded.count(need.function)) continue;
      verdict.applied = false;
      if (!need.uses || verdict.report) continue;
      auto reason = whyNot.find(need.function);
      verdict.reason = reason != whyNot.end() ? reason->second : "`" + need.name + "` gets no Fabric";
      verdict.report = true;
      verdict.neverRuns = dead.count(need.function) > 0;
    }
    if (optional || isThreadingEdit(match)) verdict.report = false;
  }
  return verdicts;
}

}  // namespace fabricize::threading
