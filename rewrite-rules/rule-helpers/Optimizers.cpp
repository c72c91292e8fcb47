#include "rule-helpers/Optimizers.h"

#include "rule-helpers/Types.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"
#include "clang/Tooling/Transformer/SourceCode.h"

#include <map>
#include <set>

namespace fabricize::optimizers {

using namespace clang;

namespace {

bool isModuleMethod(const CXXMethodDecl* method) {
  return method && match::derivesFrom(*method->getParent(), "torch::nn::Module");
}

// The class an expression's value is (through one pointer level).
QualType pointeeOrSelf(QualType type) {
  if (const auto* pointer = type->getAs<PointerType>()) return pointer->getPointeeType();
  return type;
}

// Every statement under `root`, in source order.
void forEachStatement(const Stmt* root, const std::function<void(const Stmt&)>& visit) {
  if (!root) return;
  visit(*root);
  for (const Stmt* child : root->children()) forEachStatement(child, visit);
}

const ValueDecl* referencedDecl(const Expr* e) {
  if (!e) return nullptr;
  e = e->IgnoreParenImpCasts();
  if (const auto* ref = dyn_cast<DeclRefExpr>(e)) return ref->getDecl();
  if (const auto* member = dyn_cast<MemberExpr>(e))
    if (isa<CXXThisExpr>(member->getBase()->IgnoreParenImpCasts())) return member->getMemberDecl();
  return nullptr;
}

// `lhs = rhs` as either form the AST gives it.
bool isAssignment(const Stmt& s, const Expr*& lhs, const Expr*& rhs) {
  if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->getOpcode() == BO_Assign) {
    lhs = op->getLHS();
    rhs = op->getRHS();
    return true;
  }
  if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s);
      op && op->getOperator() == OO_Equal && op->getNumArgs() == 2) {
    lhs = op->getArg(0);
    rhs = op->getArg(1);
    return true;
  }
  return false;
}

// What a function does to its local variables, gathered once: the calls
// made on each (`groups.push_back(...)`) and the values assigned to it.
struct LocalUses {
  std::map<const ValueDecl*, std::vector<const Expr*>> feeds;  // expressions whose values flow into it
};

LocalUses usesIn(const Stmt* body) {
  LocalUses uses;
  forEachStatement(body, [&](const Stmt& s) {
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) {
      if (const ValueDecl* object = referencedDecl(call->getImplicitObjectArgument()))
        for (const Expr* argument : call->arguments()) uses.feeds[object].push_back(argument);
      return;
    }
    const Expr *lhs = nullptr, *rhs = nullptr;
    if (isAssignment(s, lhs, rhs))
      if (const ValueDecl* target = referencedDecl(lhs)) uses.feeds[target].push_back(rhs);
    if (const auto* loop = dyn_cast<CXXForRangeStmt>(&s))
      if (const VarDecl* variable = loop->getLoopVariable()) uses.feeds[variable].push_back(loop->getRangeInit());
  });
  return uses;
}

// The models whose parameters reach `expression`: directly
// (`model->parameters()`), or through local variables it reads (a
// vector of parameter groups filled with push_back, a vector of tensors
// filled from `model->named_parameters()`).
void collectModels(const Expr* expression, const LocalUses& uses, std::set<const ValueDecl*>& visited,
                   std::vector<Model>& out) {
  auto addModel = [&out](const Model& model) {
    if (!model.decl) return;
    for (const Model& m : out)
      if (sameModel(m, model)) return;
    out.push_back(model);
  };
  forEachStatement(expression, [&](const Stmt& s) {
    // A factory of the class's own (`optimizer_ = make_optimizer(lr);` in a
    // BaseTrainer): the members whose parameters the optimizer it returns
    // trains (`return std::make_unique<Adam>(model_->parameters(), ...)`).
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s))
      if (const auto* object = dyn_cast_or_null<CXXThisExpr>(call->getImplicitObjectArgument()->IgnoreParenImpCasts());
          object && object->isImplicit())
        if (const FunctionDecl* callee = call->getDirectCallee(); callee && visited.insert(callee).second)
          if (const FunctionDecl* definition = callee->getDefinition(); definition && definition->getBody()) {
            LocalUses theirs = usesIn(definition->getBody());
            std::vector<Model> returned;
            forEachStatement(definition->getBody(), [&](const Stmt& inner) {
              if (const auto* ret = dyn_cast<ReturnStmt>(&inner); ret && ret->getRetValue())
                collectModels(ret->getRetValue(), theirs, visited, returned);
            });
            for (const Model& model : returned)
              if (isa<FieldDecl>(model.decl)) addModel(model);
          }
    // A model handed to a function that builds the optimizer or its
    // parameter list: `make_optimizer(model, lr)`, `build_groups(*net)`.
    if (const auto* call = dyn_cast<CallExpr>(&s); call && !isa<CXXOperatorCallExpr>(call))
      for (const Expr* argument : call->arguments())
        if (match::isModuleType(argument->IgnoreParenImpCasts()->getType())) addModel(rootModule(*argument));
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) {
      const CXXMethodDecl* method = call->getMethodDecl();
      if (method && (match::plainName(method) == "parameters" || match::plainName(method) == "named_parameters") &&
          isModuleMethod(method)) {
        addModel(rootModule(*call->getImplicitObjectArgument()));
      }
      return;
    }
    const auto* ref = dyn_cast<DeclRefExpr>(&s);
    if (!ref) return;
    const auto* variable = dyn_cast<VarDecl>(ref->getDecl());
    // A module is a model of its own; another optimizer (`Optimizer* p =
    // &optimizer`) is an alias, not a new one.
    if (!variable || match::isModuleType(variable->getType()) || match::isOptimizerHandle(variable->getType()) ||
        !visited.insert(variable).second)
      return;
    if (const Expr* init = variable->getInit()) collectModels(init, uses, visited, out);
    auto feeds = uses.feeds.find(variable);
    if (feeds != uses.feeds.end())
      for (const Expr* feed : feeds->second) collectModels(feed, uses, visited, out);
  });
}

std::vector<Model> modelsOf(const Expr* expression, const LocalUses& uses) {
  std::vector<Model> models;
  std::set<const ValueDecl*> visited;
  collectModels(expression, uses, visited, models);
  return models;
}

bool holdsByPointer(QualType type) {
  type = type.getNonReferenceType();
  if (type->isPointerType()) return true;
  const auto* record = type->getAsCXXRecordDecl();
  return record && !match::derivesFrom(*record, "torch::optim::Optimizer");  // unique_ptr / shared_ptr
}

// The statement of `owner` (a compound statement) that holds `s`.
const Stmt* childOf(const Stmt* owner, const Stmt& s, ASTContext& context) {
  DynTypedNode current = DynTypedNode::create(s);
  for (int depth = 0; depth < 64; ++depth) {
    DynTypedNodeList parents = context.getParents(current);
    if (parents.empty()) return nullptr;
    if (parents[0].get<Stmt>() == owner) return current.get<Stmt>();
    current = parents[0];
  }
  return nullptr;
}

// The block a local variable is declared in.
const Stmt* blockOf(const VarDecl& variable, ASTContext& context) {
  for (const DynTypedNode& parent : context.getParents(variable))
    if (const auto* declaration = parent.get<DeclStmt>())
      for (const DynTypedNode& grand : context.getParents(*declaration))
        if (const auto* block = grand.get<CompoundStmt>()) return block;
  return nullptr;
}

}  // namespace

Model rootModule(const Expr& object) {
  const Expr* e = &object;
  for (int depth = 0; depth < 32 && e; ++depth) {
    e = e->IgnoreParenImpCasts();
    if (const auto* op = dyn_cast<CXXOperatorCallExpr>(e)) {
      if (op->getOperator() != OO_Arrow && op->getOperator() != OO_Star) return {};
      e = op->getArg(0);
      continue;
    }
    if (const auto* unary = dyn_cast<UnaryOperator>(e)) {
      if (unary->getOpcode() != UO_Deref) return {};
      e = unary->getSubExpr();
      continue;
    }
    if (const auto* member = dyn_cast<MemberExpr>(e)) {
      const Expr* base = member->getBase()->IgnoreParenImpCasts();
      // `model->head`: a submodule; the model is what holds it. A member of
      // `this` or of a plain struct is the model itself.
      const auto* baseClass = pointeeOrSelf(base->getType())->getAsCXXRecordDecl();
      if (!isa<CXXThisExpr>(base) && baseClass && match::derivesFrom(*baseClass, "torch::nn::Module")) {
        e = base;
        continue;
      }
      if (match::isModuleType(member->getType())) return {member->getMemberDecl(), member};
      return {};
    }
    if (const auto* ref = dyn_cast<DeclRefExpr>(e)) {
      if (match::isModuleType(ref->getType())) return {ref->getDecl(), ref};
      return {};
    }
    return {};
  }
  return {};
}

std::vector<Creation> creationsIn(const FunctionDecl& function, ASTContext& context) {
  std::vector<Creation> creations;
  const Stmt* body = function.getBody();
  if (!body) return creations;
  LocalUses uses = usesIn(body);
  const SourceManager& sm = context.getSourceManager();
  auto place = [&](const Stmt& s, const ValueDecl* handle) -> const Stmt* {
    const Stmt* block = body;
    if (const auto* variable = dyn_cast<VarDecl>(handle); variable && !isa<ParmVarDecl>(variable))
      if (const Stmt* declared = blockOf(*variable, context)) block = declared;
    if (const Stmt* child = childOf(block, s, context)) return child;
    return childOf(body, s, context);
  };
  auto add = [&](Creation creation) {
    if (creation.models.empty()) return;
    creation.pointerLike = holdsByPointer(creation.handle->getType());
    creations.push_back(std::move(creation));
  };
  if (const auto* constructor = dyn_cast<CXXConstructorDecl>(&function))
    for (const CXXCtorInitializer* init : constructor->inits()) {
      if (!init->isMemberInitializer() || !match::isOptimizerHandle(init->getMember()->getType())) continue;
      Creation creation;
      creation.handle = init->getMember();
      creation.initializer = init;
      if (init->isWritten()) {
        creation.models = modelsOf(init->getInit(), uses);
        creation.at = sm.getExpansionLoc(init->getSourceLocation());
      } else if (const Expr* value = defaultMemberInitializer(*init->getMember())) {
        // `Adam optimizer_{model_->parameters()}` in the class: this
        // constructor makes it too.
        creation.models = modelsOf(value, LocalUses());
        creation.at = sm.getExpansionLoc(value->getBeginLoc());
      }
      add(std::move(creation));
    }
  forEachStatement(body, [&](const Stmt& s) {
    if (const auto* declaration = dyn_cast<DeclStmt>(&s)) {
      for (const Decl* d : declaration->decls()) {
        const auto* variable = dyn_cast<VarDecl>(d);
        if (!variable || !variable->getInit() || !match::isOptimizerHandle(variable->getType())) continue;
        Creation creation;
        creation.handle = variable;
        creation.statement = declaration;
        creation.models = modelsOf(variable->getInit(), uses);
        creation.place = place(s, variable);
        creation.at = sm.getExpansionLoc(s.getBeginLoc());
        add(std::move(creation));
      }
      return;
    }
    OptimizerAssignment assignment = optimizerAssignment(s);
    if (!assignment.handle) return;
    Creation creation;
    creation.handle = assignment.handle;
    creation.statement = &s;
    creation.models = modelsOf(assignment.value, uses);
    creation.place = place(s, assignment.handle);
    creation.at = sm.getExpansionLoc(s.getBeginLoc());
    add(std::move(creation));
  });
  return creations;
}

const Expr* defaultMemberInitializer(const FieldDecl& field) {
  return field.hasInClassInitializer() ? field.getInClassInitializer() : nullptr;
}

std::vector<Creation> memberInitializerCreations(const CXXRecordDecl& record, ASTContext& context) {
  std::vector<Creation> creations;
  for (const FieldDecl* field : record.fields()) {
    const Expr* value = defaultMemberInitializer(*field);
    if (!value || !match::isOptimizerHandle(field->getType())) continue;
    Creation creation;
    creation.handle = field;
    creation.pointerLike = holdsByPointer(field->getType());
    creation.models = modelsOf(value, LocalUses());
    creation.at = context.getSourceManager().getExpansionLoc(value->getBeginLoc());
    if (!creation.models.empty()) creations.push_back(std::move(creation));
  }
  return creations;
}

std::string optimizerText(const Creation& creation) {
  return (creation.pointerLike ? "*" : "") + creation.handle->getName().str();
}

std::string setupCalls(const SetupGroup& group, size_t creations, const std::string& fabric, const std::string& indent,
                       ASTContext& context) {
  std::string text;
  for (size_t i = 0; i < group.models.size(); ++i) {
    const Expr& model = *group.models[i].reference;
    std::string call = fabric + ".setup(" + (match::isUniquePointerToModule(model.getType()) ? "*" : "") +
                       tooling::getText(model, context).str();
    if (i + 1 == group.models.size()) {
      std::vector<const ValueDecl*> named;
      for (size_t c = 0; c < creations; ++c)
        if (std::find(named.begin(), named.end(), group.creations[c]->handle) == named.end()) {
          named.push_back(group.creations[c]->handle);
          call += ", " + optimizerText(*group.creations[c]);
        }
    }
    text += (i ? "\n" + indent : "") + call + ");";
  }
  return text;
}

OptimizerAssignment optimizerAssignment(const Stmt& s) {
  OptimizerAssignment found;
  if (const auto* declaration = dyn_cast<DeclStmt>(&s)) {
    for (const Decl* d : declaration->decls())
      if (const auto* variable = dyn_cast<VarDecl>(d);
          variable && variable->getInit() && match::isOptimizerHandle(variable->getType()))
        return {variable, variable->getInit()};
    return found;
  }
  const Expr *lhs = nullptr, *rhs = nullptr;
  const ValueDecl* handle = nullptr;
  if (isAssignment(s, lhs, rhs)) {
    handle = referencedDecl(lhs);
  } else if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) {
    const CXXMethodDecl* method = call->getMethodDecl();
    if (method && match::plainName(method) == "reset" && call->getNumArgs() == 1) {
      handle = referencedDecl(call->getImplicitObjectArgument());
      rhs = call->getArg(0);
    }
  }
  if (handle && rhs && match::isOptimizerHandle(handle->getType())) found = {handle, rhs};
  return found;
}

bool refersToOptimizer(const Expr& value) {
  bool found = false;
  forEachStatement(&value, [&](const Stmt& s) {
    const ValueDecl* decl = nullptr;
    if (const auto* ref = dyn_cast<DeclRefExpr>(&s)) decl = ref->getDecl();
    if (const auto* member = dyn_cast<MemberExpr>(&s)) decl = member->getMemberDecl();
    if (decl && (isa<VarDecl>(decl) || isa<FieldDecl>(decl)) && match::isOptimizerHandle(decl->getType())) found = true;
  });
  return found;
}

const Creation* creationOf(const std::vector<Creation>& creations, const Stmt* statement,
                           const CXXCtorInitializer* initializer) {
  for (const Creation& creation : creations)
    if ((statement && creation.statement == statement) || (initializer && creation.initializer == initializer))
      return &creation;
  return nullptr;
}

std::vector<SetupGroup> setupGroups(const std::vector<Creation>& creations) {
  // Union-find over creations: two belong together when they share a model.
  std::vector<size_t> parent(creations.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  std::function<size_t(size_t)> find = [&](size_t i) { return parent[i] == i ? i : parent[i] = find(parent[i]); };
  for (size_t i = 0; i < creations.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      for (const Model& a : creations[i].models)
        for (const Model& b : creations[j].models)
          if (sameModel(a, b)) parent[find(i)] = find(j);
  std::map<size_t, SetupGroup> groups;
  std::vector<size_t> order;  // group roots by their last creation
  for (size_t i = 0; i < creations.size(); ++i) {
    SetupGroup& group = groups[find(i)];
    group.creations.push_back(&creations[i]);
    for (const Model& model : creations[i].models) {
      bool seen = false;
      for (const Model& m : group.models) seen = seen || sameModel(m, model);
      if (!seen) group.models.push_back(model);
    }
  }
  std::vector<SetupGroup> result;
  for (auto& [root, group] : groups) result.push_back(std::move(group));
  return result;
}

}  // namespace fabricize::optimizers
