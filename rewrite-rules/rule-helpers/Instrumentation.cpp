// The instrumentation `fabricize verify` applies to the ORIGINAL program (in
// a scratch copy): the records the runtime makes in the migrated program,
// made by the original at the same places. Not part of the catalogue: these
// rules never touch a user's files.
//   verify-begin     first in main: fabric::verify::begin() (fixed seed)
//   verify-backward  loss.backward(...)  -> (record_loss(loss), loss.backward(...))
//   verify-step      opt.step(...)       -> (StepRecord(opt), opt.step(...))
// The comma keeps each call's type and value, whatever its form.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Instrumentation.h"
#include "rule-helpers/Matchers.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

namespace {

constexpr const char* kExplanation = "record for fabricize verify";

Rule beginRule() {
  auto main = functionDecl(isMain(), isDefinition(), hasBody(compoundStmt(has(stmt())).bind("body")));
  return {"verify-begin", "verify", "fabric::verify::begin() first in main: the seed both programs start from.",
          RuleKind::Rewrite,
          makeRule(main,
                   insertBefore(edits::fabricInsertionPoint("body"),
                                edits::fabricInsertionStatement("body", "fabric::verify::begin();")),
                   cat(kExplanation))};
}

Rule backwardRule() {
  auto tensorBackward =
      cxxMemberCallExpr(callee(cxxMethodDecl(hasName("backward"), ofClass(tensorClass()))), on(expr().bind("loss")));
  auto autogradBackward = callExpr(callee(functionDecl(hasName("::torch::autograd::backward"))),
                                   hasArgument(0, expr(hasDescendant(initListExpr(hasInit(0, expr().bind("loss")))))));
  auto record = changeTo(node("call"), cat("(fabric::verify::record_loss(", node("loss"), "), ", node("call"), ")"));
  return {"verify-backward", "verify", "Record the loss before each backward().", RuleKind::Rewrite,
          applyFirst<std::string>({makeRule(tensorBackward.bind("call"), record, cat(kExplanation)),
                                   makeRule(autogradBackward.bind("call"), record, cat(kExplanation))})};
}

Rule stepRule() {
  auto stepCall = cxxMemberCallExpr(
      callee(cxxMethodDecl(hasName("step"), ofClass(cxxRecordDecl(isSameOrDerivedFrom("::torch::optim::Optimizer"))))));
  auto byValue = expr(hasType(valueOrReference(optimizerType())));
  // `opt->step()` through a raw or smart pointer: StepRecord takes either.
  auto object = ignoringParenImpCasts(
      anyOf(byValue.bind("object"),
            cxxOperatorCallExpr(hasOverloadedOperatorName("->"), hasArgument(0, expr().bind("object"))),
            expr().bind("object")));
  return {
      "verify-step", "verify", "Record the trained parameters' hash after each optimizer step.", RuleKind::Rewrite,
      makeRule(cxxMemberCallExpr(stepCall, on(object)).bind("call"),
               changeTo(node("call"), cat("(fabric::verify::StepRecord(", node("object"), "), ", node("call"), ")")),
               cat(kExplanation))};
}

}  // namespace

std::vector<Rule> buildInstrumentation() { return {beginRule(), backwardRule(), stepRule()}; }

}  // namespace fabricize
