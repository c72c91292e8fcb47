// Step 4: device moves. Fabric's setup owns the model's device and its loader
// delivers batches on the device, so those moves go; any other tensor moves
// to fabric.device(). Dtype arguments are kept; pure dtype casts never match.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

namespace {

auto withDtype() { return hasArgument(1, expr(hasType(scalarTypeEnum())).bind("dtype")); }

// Removes the device argument and the comma after it: `.to(device, kHalf)`
// -> `.to(kHalf)`.
ASTEdit dropDeviceArgument() { return changeTo(enclose(node("device"), before(node("dtype"))), cat("")); }

// A device the user spelled as CUDA: `torch::kCUDA`, `torch::Device("cuda")`,
// `cuda ? torch::kCUDA : torch::kCPU`. (A CPU device stays: that choice is
// deliberate in a single-device program too.)
auto spelledCudaDevice(std::string id) {
  auto cuda = expr(anyOf(
      declRefExpr(to(namedDecl(anyOf(hasName("::c10::kCUDA"), enumConstantDecl(hasName("::c10::DeviceType::CUDA")))))),
      stringLiteral(isCudaDeviceString())));
  return spelledAs(expr(hasType(deviceLikeType()), anyOf(ignoringParenImpCasts(cuda), hasDescendant(cuda)),
                        unless(indexedDevice()), unless(hasDescendant(indexedDevice())),
                        unless(ignoringImplicit(fabricDeviceCall())))
                       .bind(id));
}

// A device the code does not choose but follows, right on any number of
// ranks: another tensor's or a module parameter's (`.to(x.device())`, a
// local initialised from one), or the CPU spelled at the move
// (`.to(torch::kCPU)`: a batch moved off the device to save an image, a
// metric read on the host).
auto deviceAgnostic() {
  auto queried =
      cxxMemberCallExpr(callee(cxxMethodDecl(hasName("device"), ofClass(anyOf(tensorClass(), moduleClass())))));
  auto cpu = expr(anyOf(
      declRefExpr(to(namedDecl(anyOf(hasName("::c10::kCPU"), enumConstantDecl(hasName("::c10::DeviceType::CPU")))))),
      stringLiteral(matchesCpuString())));
  auto agnostic = expr(anyOf(ignoringParenImpCasts(queried), ignoringParenImpCasts(cpu),
                             cxxConstructExpr(hasType(recordNamed("::c10::Device")), hasArgument(0, spelledAs(cpu)))));
  // A local taken from a tensor's device follows it; one that starts as the
  // CPU is usually the program's device, made CUDA later when there is one.
  return spelledAs(expr(anyOf(agnostic, declRefExpr(to(varDecl(hasInitializer(spelledAs(queried))))))));
}

}  // namespace

Rule makeDeviceMoveRule() {
  // A device with a fixed index other than 0 is a person's decision
  // (fabric-hardcoded-device reports it).
  auto fixedIndex = hasArgument(0, expr(anyOf(ignoringImplicit(indexedDevice()), hasDescendant(indexedDevice()))));
  auto followsItsData = hasArgument(0, deviceAgnostic());
  auto moduleTo = cxxMemberCallExpr(callee(cxxMethodDecl(hasName("to"), ofClass(moduleClass()))),
                                    hasArgument(0, deviceArgument("device")), on(moduleReference("module")),
                                    unless(fixedIndex), unless(followsItsData), inFabricScope());
  auto statementOnly = isWholeStatement();
  auto tensorMove = expr(tensorDeviceMove(expr().bind("tensor")), unless(cxxMemberCallExpr(fixedIndex)),
                         unless(cxxMemberCallExpr(followsItsData)), inFabricScope());
  auto isCuda = callee(cxxMethodDecl(hasName("cuda")));
  // A device parameter of a function: where the caller says (a batch's
  // to_device overload, a helper given `device`; main passes
  // fabric.device()), also in a function that is given the Fabric as a
  // parameter (which one is, is known only once the project is matched, and
  // migrating the migrated code must change nothing). A method of a class
  // that keeps the Fabric (a Trainer) uses it directly.
  auto hasOwnFabric =
      cxxMethodDecl(ofClass(anyOf(classNeedingFabric(), has(fieldDecl(hasType(valueOrReference(fabricType())))))));
  auto givenDevice = spelledAs(
      declRefExpr(to(parmVarDecl(hasType(valueOrReference(deviceLikeType())), unless(hasDeclContext(hasOwnFabric))))));
  // `data = data.cuda();` on a loader batch: the whole statement goes.
  auto batchSelfMove = cxxOperatorCallExpr(
      hasOverloadedOperatorName("="), hasArgument(0, ignoringParenImpCasts(declRefExpr(to(varDecl().bind("var"))))),
      hasArgument(1, spelledAs(tensorDeviceMove(ignoringParenImpCasts(declRefExpr(to(varDecl(equalsBoundNode("var"))))),
                                                "selfDevice"))),
      hasArgument(0, loaderBatch()), statementOnly,
      unless(hasArgument(1, spelledAs(cxxMemberCallExpr(followsItsData)))), inFabricScope());

  // Outside every function (a global, a member's default initializer) the
  // move runs before any Fabric exists: a person moves it into code that
  // has one.
  auto beforeAnyFabric =
      cxxMemberCallExpr(tensorDeviceMove(expr()), unless(fixedIndex), unless(followsItsData), unless(inFabricScope()));

  auto setUpModule = "the Fabric's setup moves the model to its device";
  auto batch = "the Fabric loader already delivers batches on the device";
  auto other = "move to the device this rank trains on";
  auto created = "create the tensor on the device this rank trains on";
  return {"fabric-device-move", "4",
          "Remove model->to(device), and .to(device)/.cuda() on batches the Fabric loader "
          "already moved; any other device move becomes .to(fabric.device()), and so does a "
          "tensor created on CUDA (TensorOptions().device(kCUDA), torch::ones(shape, kCUDA)). "
          "Dtype arguments stay; pure dtype casts are untouched.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(batchSelfMove.bind("stmt"), edits::removeStatement("stmt"), cat(batch)),
              // Modules the Fabric sets up.
              makeRule(cxxMemberCallExpr(moduleTo, isSetUpModule("module"), withDtype()), dropDeviceArgument(),
                       cat(setUpModule)),
              makeRule(cxxMemberCallExpr(moduleTo, isSetUpModule("module"), statementOnly).bind("stmt"),
                       edits::removeStatement("stmt"), cat(setUpModule)),
              // Other modules (a frozen teacher, say) still need the device;
              // a device the function is given is its caller's choice (main
              // passes fabric.device()).
              makeRule(cxxMemberCallExpr(moduleTo, unless(hasArgument(0, givenDevice))),
                       changeTo(node("device"), edits::fabricMember("device()")), cat(other)),
              // Tensors from the loader.
              makeRule(cxxMemberCallExpr(tensorMove, on(loaderBatch()), unless(isCuda), withDtype()),
                       dropDeviceArgument(), cat(batch)),
              makeRule(cxxMemberCallExpr(tensorMove, on(loaderBatch())).bind("call"),
                       changeTo(node("call"), cat(node("tensor"))), cat(batch)),
              // Any other tensor.
              makeRule(cxxMemberCallExpr(tensorMove, isCuda).bind("call"),
                       changeTo(node("call"), cat(node("tensor"), ".to(", edits::fabricMember("device()"), ")")),
                       cat(other)),
              makeRule(cxxMemberCallExpr(tensorMove, unless(hasArgument(0, givenDevice))),
                       changeTo(node("device"), edits::fabricMember("device()")), cat(other)),
              makeRule(beforeAnyFabric.bind("call"), noopEdit(node("call")),
                       cat("a device move outside any function runs before the Fabric exists: create the "
                           "tensor on the CPU here and move it with .to(fabric.device()) in code that has "
                           "the Fabric")),
              // Tensors created on CUDA: `TensorOptions().device(kCUDA)`, and a
              // factory given a CUDA device as its options, `torch::ones({2}, kCUDA)`.
              makeRule(cxxMemberCallExpr(
                           callee(cxxMethodDecl(hasName("device"),
                                                ofClass(hasAnyName("::c10::TensorOptions", "::at::TensorOptions")))),
                           hasArgument(0, spelledCudaDevice("device")), inFabricScope()),
                       changeTo(node("device"), edits::fabricMember("device()")), cat(created)),
              makeRule(callExpr(callee(functionDecl(isLibTorchDeclaration())),
                                hasAnyArgument(expr(hasType(recordTypeOf(cxxRecordDecl(
                                                        hasAnyName("::c10::TensorOptions", "::at::TensorOptions")))),
                                                    spelledCudaDevice("device"))),
                                unless(cxxMemberCallExpr()), inFabricScope()),
                       changeTo(node("device"), edits::fabricMember("device()")), cat(created)),
          })};
}

}  // namespace fabricize
