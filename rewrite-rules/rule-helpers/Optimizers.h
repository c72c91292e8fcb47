// Optimizers and the models they train, as programs build them:
//   torch::optim::SGD opt(model->parameters(), 0.1);                   by value
//   auto opt = std::make_unique<torch::optim::Adam>(model.parameters()); unique_ptr
//   std::shared_ptr<torch::optim::Optimizer> opt; ... opt = std::make_shared<SGD>(...);
//   optimizer_(std::make_unique<Adam>(model_->parameters()))            a member
//   std::vector<OptimizerParamGroup> groups; groups.emplace_back(model->head->parameters(), ...);
//   torch::optim::Adam opt(groups, ...);                                 parameter groups
// fabric-setup sets up each model with the optimizers over it; the device
// rules leave a trained model's device to that setup.
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/Expr.h"

#include <string>
#include <vector>

namespace fabricize::optimizers {

// A model whose parameters an optimizer gets: `model` in `model->parameters()`,
// `model->head->parameters()`, `exp.net->parameters()`, `model_` in a method.
struct Model {
  const clang::ValueDecl* decl = nullptr;
  const clang::Expr* reference = nullptr;  // as spelled: what fabric.setup(...) names
};

// One place an optimizer comes into being over some models' parameters.
struct Creation {
  const clang::ValueDecl* handle = nullptr;  // the optimizer's variable or member
  bool pointerLike = false;                  // held by pointer: `*handle` is the optimizer
  std::vector<Model> models;                 // in order of appearance
  // What the creation is: a DeclStmt, an assignment or reset() expression,
  // or (for a member initialiser) null.
  const clang::Stmt* statement = nullptr;
  const clang::CXXCtorInitializer* initializer = nullptr;
  // The statement of the function's body (or of the block that declares the
  // optimizer) after which the optimizer exists; null for a member
  // initialiser (then: the start of the constructor's body).
  const clang::Stmt* place = nullptr;
  clang::SourceLocation at;  // where it is written
};

// The module at the root of `object` in `object.parameters()`: `model` in
// `model->head`, `exp.net` in `exp.net->...`; null when there is none.
Model rootModule(const clang::Expr& object);

// Every optimizer creation in `function`, in source order.
std::vector<Creation> creationsIn(const clang::FunctionDecl& function, clang::ASTContext& context);

// The default member initialiser of `field` (`Adam optimizer_{model_->parameters()}`), or null.
const clang::Expr* defaultMemberInitializer(const clang::FieldDecl& field);

// The optimizers a class makes by its default member initialisers, over the
// models they name (what its implicit default constructor makes).
std::vector<Creation> memberInitializerCreations(const clang::CXXRecordDecl& record, clang::ASTContext& context);

// What a statement gives an optimizer handle, whether or not models are
// found in it: `Adam opt(...)` (its first such variable), `opt = ...`,
// `opt.reset(...)`. Null handle when it gives none.
struct OptimizerAssignment {
  const clang::ValueDecl* handle = nullptr;
  const clang::Expr* value = nullptr;
};
OptimizerAssignment optimizerAssignment(const clang::Stmt& statement);

// Whether `value` reads another optimizer handle: an alias (`Optimizer& o =
// optimizer`, `opt = std::move(other)`), not a new optimizer.
bool refersToOptimizer(const clang::Expr& value);

// The creation `statement` (or member initialiser) is, if it is one.
const Creation* creationOf(const std::vector<Creation>& creations, const clang::Stmt* statement,
                           const clang::CXXCtorInitializer* initializer = nullptr);

// The optimizers and models that must be set up together (an optimizer over
// two models, two optimizers over one), each group in source order of its
// last creation.
struct SetupGroup {
  std::vector<const Creation*> creations;
  std::vector<Model> models;
};
std::vector<SetupGroup> setupGroups(const std::vector<Creation>& creations);

// How a setup call names the optimizer: `opt`, or `*opt` for one held by pointer.
std::string optimizerText(const Creation& creation);

// `fabric.setup(model, optimizer...);` for `group`, naming its first
// `creations` optimizers (`*opt` for one held by pointer); one call per
// model, the later ones on lines of their own indented by `indent`.
std::string setupCalls(const SetupGroup& group, size_t creations, const std::string& fabric, const std::string& indent,
                       clang::ASTContext& context);

// Whether the two declarations name the same model.
inline bool sameModel(const Model& a, const Model& b) { return a.decl == b.decl; }

}  // namespace fabricize::optimizers
