#include "storage_materializer.h"

#include <ATen/record_function.h>

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace fabric {
namespace detail {

struct StorageMaterializer::State {
  Fill fill;
  struct Group {
    std::vector<c10::intrusive_ptr<c10::StorageImpl>> storages;
    std::vector<size_t> bytes;
    bool resident = true;
  };
  std::vector<Group> groups;
  std::atomic<uint64_t> on_demand{0};
  // Held while a group is released or brought back: another thread reading
  // the group waits for its bytes.
  mutable std::mutex mutex;

  void materialize(size_t group, bool on_demand_read);
};

namespace {

// Every released storage of every materializer, and the one operator
// callback they share (registered while a materializer exists).
struct Registry {
  std::mutex mutex;
  std::unordered_map<const c10::StorageImpl*, std::pair<std::weak_ptr<StorageMaterializer::State>, size_t>> owners;
  std::atomic<size_t> released_groups{0};  // zero: the callback returns at once
  size_t materializers = 0;
  at::CallbackHandle handle = at::INVALID_CALLBACK_HANDLE;
};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: callbacks may run at exit
  return *instance;
}

// This thread is filling a group: the operators it runs (copy_, an
// all-gather) must not look for released storages again.
thread_local bool filling = false;

class FillingScope {
 public:
  FillingScope() : outer_(filling) { filling = true; }
  ~FillingScope() { filling = outer_; }

 private:
  bool outer_;
};

void bring_back_storage_of(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return;
  const c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  std::shared_ptr<StorageMaterializer::State> owner;
  size_t group = 0;
  {
    Registry& all = registry();
    std::lock_guard<std::mutex> lock(all.mutex);
    auto found = all.owners.find(storage);
    if (found == all.owners.end()) return;
    owner = found->second.first.lock();
    group = found->second.second;
  }
  if (owner) owner->materialize(group, true);
}

void bring_back_inputs(const c10::IValue& value) {
  if (value.isTensor()) {
    bring_back_storage_of(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& tensor : value.toTensorVector()) bring_back_storage_of(tensor);
  } else if (value.isList()) {
    for (const c10::IValue& element : value.toListRef()) bring_back_inputs(element);
  }
}

std::unique_ptr<at::ObserverContext> on_operator_start(const at::RecordFunction& call) {
  if (filling || registry().released_groups.load(std::memory_order_acquire) == 0) return nullptr;
  FillingScope scope;
  for (const c10::IValue& input : call.inputs()) bring_back_inputs(input);
  return nullptr;
}

}  // namespace

void StorageMaterializer::State::materialize(size_t group, bool on_demand_read) {
  std::lock_guard<std::mutex> lock(mutex);
  Group& entry = groups.at(group);
  if (entry.resident) return;
  FillingScope scope;
  for (size_t i = 0; i < entry.storages.size(); ++i) {
    c10::StorageImpl& storage = *entry.storages[i];
    c10::Allocator* allocator = storage.allocator();
    if (allocator == nullptr) allocator = c10::GetAllocator(storage.device_type());
    storage.set_data_ptr_noswap(allocator->allocate(entry.bytes[i]));
    storage.set_nbytes(entry.bytes[i]);
  }
  fill(group);
  entry.resident = true;
  registry().released_groups.fetch_sub(1, std::memory_order_acq_rel);
  if (on_demand_read) on_demand.fetch_add(1, std::memory_order_relaxed);
}

StorageMaterializer::StorageMaterializer(Fill fill) : state_(std::make_shared<State>()) {
  state_->fill = std::move(fill);
  Registry& all = registry();
  std::lock_guard<std::mutex> lock(all.mutex);
  if (all.materializers++ == 0) {
    // Only operators (not autograd nodes or user scopes): a backward node's
    // operators read the tensors it saved, and are operators themselves.
    all.handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_operator_start).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  }
}

StorageMaterializer::~StorageMaterializer() {
  // The tensors outlive this object (the model holds them): they get their
  // bytes back, or stay empty if the fill cannot run any more.
  for (size_t group = 0; group < state_->groups.size(); ++group) {
    try {
      state_->materialize(group, false);
    } catch (...) {
    }
  }
  Registry& all = registry();
  std::lock_guard<std::mutex> lock(all.mutex);
  for (const State::Group& group : state_->groups)
    for (const auto& storage : group.storages) all.owners.erase(storage.get());
  if (--all.materializers == 0 && all.handle != at::INVALID_CALLBACK_HANDLE) {
    at::removeCallback(all.handle);
    all.handle = at::INVALID_CALLBACK_HANDLE;
  }
}

size_t StorageMaterializer::add_group(const std::vector<at::Tensor>& tensors) {
  State::Group group;
  for (const at::Tensor& tensor : tensors) {
    TORCH_CHECK(tensor.has_storage(), "fabric: a tensor without storage cannot be released");
    c10::intrusive_ptr<c10::StorageImpl> storage =
        c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(tensor.storage().unsafeGetStorageImpl());
    bool seen = false;
    for (const auto& known : group.storages) seen = seen || known.get() == storage.get();
    if (seen) continue;
    group.bytes.push_back(storage->nbytes());
    group.storages.push_back(std::move(storage));
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  const size_t index = state_->groups.size();
  Registry& all = registry();
  {
    std::lock_guard<std::mutex> registry_lock(all.mutex);
    for (const auto& storage : group.storages) {
      TORCH_CHECK(all.owners.count(storage.get()) == 0, "fabric: a tensor's storage is in two groups");
      all.owners[storage.get()] = {state_, index};
    }
  }
  state_->groups.push_back(std::move(group));
  return index;
}

void StorageMaterializer::release(size_t group) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  State::Group& entry = state_->groups.at(group);
  if (!entry.resident) return;
  for (const auto& storage : entry.storages) {
    storage->set_data_ptr_noswap(at::DataPtr(nullptr, storage->device()));
    storage->set_nbytes(0);
  }
  entry.resident = false;
  registry().released_groups.fetch_add(1, std::memory_order_acq_rel);
}

void StorageMaterializer::materialize(size_t group) { state_->materialize(group, false); }

void StorageMaterializer::materialize_all() {
  for (size_t group = 0; group < groups(); ++group) materialize(group);
}

bool StorageMaterializer::resident(size_t group) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->groups.at(group).resident;
}

size_t StorageMaterializer::groups() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->groups.size();
}

uint64_t StorageMaterializer::materialized_on_demand() const { return state_->on_demand.load(); }

}  // namespace detail
}  // namespace fabric
