#include "strategies/storage_materializer.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace fabric {
namespace detail {

struct StorageMaterializer::State {
  Fill fill;
  BeforeRelease before_release;
  struct Group {
    std::vector<c10::intrusive_ptr<c10::StorageImpl>> storages;
    std::vector<size_t> bytes;
    std::vector<bool> kept;
    std::vector<size_t> storage_of_tensor;  // add_group's tensors -> storages
    bool fill_allocates = false;
    bool resident = true;
  };
  std::vector<Group> groups;
  std::atomic<uint64_t> on_demand{0};
  bool release_others_on_demand = false;
  int pinned = 0;
  // Held while a group is released or brought back: another thread reading
  // the group waits for its bytes.
  mutable std::recursive_mutex mutex;

  void materialize(size_t group, bool on_demand_read);
  void release(size_t group);
  // An operator reads `needed` (sorted): the others are released first
  // (when so configured), then the needed ones brought back in order.
  void bring_back_for_operator(const std::vector<size_t>& needed);
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

void free_storage(c10::StorageImpl& storage) {
  storage.set_data_ptr_noswap(at::DataPtr(nullptr, storage.device()));
  storage.set_nbytes(0);
}

// This thread is filling a group (or paused): the operators it runs (copy_,
// an all-gather) must not look for released storages again.
thread_local bool filling = false;

class FillingScope {
 public:
  FillingScope() : outer_(filling) { filling = true; }
  ~FillingScope() { filling = outer_; }

 private:
  bool outer_;
};

// The groups an operator's inputs belong to, per materializer.
using Needed = std::vector<std::pair<std::shared_ptr<StorageMaterializer::State>, std::vector<size_t>>>;

void note_storage_of(const at::Tensor& tensor, Needed& needed) {
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
  if (!owner) return;
  for (auto& [state, groups] : needed) {
    if (state == owner) {
      if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
      return;
    }
  }
  needed.push_back({owner, {group}});
}

void note_inputs(const c10::IValue& value, Needed& needed) {
  if (value.isTensor()) {
    note_storage_of(value.toTensor(), needed);
  } else if (value.isTensorList()) {
    for (const at::Tensor& tensor : value.toTensorVector()) note_storage_of(tensor, needed);
  } else if (value.isList()) {
    for (const c10::IValue& element : value.toListRef()) note_inputs(element, needed);
  }
}

std::unique_ptr<at::ObserverContext> on_operator_start(const at::RecordFunction& call) {
  if (filling || registry().released_groups.load(std::memory_order_acquire) == 0) return nullptr;
  FillingScope scope;
  Needed needed;
  for (const c10::IValue& input : call.inputs()) note_inputs(input, needed);
  // LibTorch logs and swallows what a callback throws, and the operator
  // would then read memory never filled (or none): a failure here (out of
  // memory bringing a group back) ends the process with its reason.
  try {
    for (auto& [state, groups] : needed) {
      std::sort(groups.begin(), groups.end());
      state->bring_back_for_operator(groups);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr,
                 "fabric: parameters released between uses could not be brought back for %s: %s (ending "
                 "this process)\n",
                 call.name(), error.what());
    std::fflush(nullptr);
    std::_Exit(1);
  }
  return nullptr;
}

}  // namespace

void StorageMaterializer::State::materialize(size_t group, bool on_demand_read) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  Group& entry = groups.at(group);
  if (entry.resident) return;
  FillingScope scope;
  for (size_t i = 0; i < entry.storages.size() && !entry.fill_allocates; ++i) {
    if (entry.kept[i]) continue;
    c10::StorageImpl& storage = *entry.storages[i];
    c10::Allocator* allocator = storage.allocator();
    if (allocator == nullptr) allocator = c10::GetAllocator(storage.device_type());
    storage.set_data_ptr_noswap(allocator->allocate(entry.bytes[i]));
    storage.set_nbytes(entry.bytes[i]);
  }
  // Resident before the fill: a fill that throws leaves the group readable
  // (its values unfilled) rather than half released.
  entry.resident = true;
  registry().released_groups.fetch_sub(1, std::memory_order_acq_rel);
  fill(group);
  if (on_demand_read) on_demand.fetch_add(1, std::memory_order_relaxed);
}

void StorageMaterializer::State::release(size_t group) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  Group& entry = groups.at(group);
  if (!entry.resident) return;
  if (before_release) {
    FillingScope scope;
    before_release(group);
  }
  for (size_t i = 0; i < entry.storages.size(); ++i) {
    if (entry.kept[i]) continue;
    free_storage(*entry.storages[i]);
  }
  entry.resident = false;
  registry().released_groups.fetch_add(1, std::memory_order_acq_rel);
}

void StorageMaterializer::State::bring_back_for_operator(const std::vector<size_t>& needed) {
  std::lock_guard<std::recursive_mutex> lock(mutex);
  bool any_released = false;
  for (size_t group : needed) any_released = any_released || !groups.at(group).resident;
  if (!any_released) return;
  if (release_others_on_demand && pinned == 0) {
    for (size_t group = 0; group < groups.size(); ++group) {
      if (!std::binary_search(needed.begin(), needed.end(), group)) release(group);
    }
  }
  for (size_t group : needed) materialize(group, true);
}

StorageMaterializer::StorageMaterializer(Fill fill, BeforeRelease before_release) : state_(std::make_shared<State>()) {
  state_->fill = std::move(fill);
  state_->before_release = std::move(before_release);
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
  for (size_t group = 0; state_->fill && group < state_->groups.size(); ++group) {
    try {
      state_->materialize(group, false);
    } catch (...) {
    }
  }
  Registry& all = registry();
  // Groups left released (abandoned) no longer count: the callback of a
  // later materializer returns at once again while none of its own is.
  for (const State::Group& group : state_->groups) {
    if (!group.resident) all.released_groups.fetch_sub(1, std::memory_order_acq_rel);
  }
  std::lock_guard<std::mutex> lock(all.mutex);
  for (const State::Group& group : state_->groups)
    for (const auto& storage : group.storages) all.owners.erase(storage.get());
  if (--all.materializers == 0 && all.handle != at::INVALID_CALLBACK_HANDLE) {
    at::removeCallback(all.handle);
    all.handle = at::INVALID_CALLBACK_HANDLE;
  }
}

size_t StorageMaterializer::add_group(const std::vector<at::Tensor>& tensors, const std::vector<bool>& kept,
                                      bool fill_allocates) {
  TORCH_CHECK(kept.empty() || kept.size() == tensors.size(), "fabric: add_group: one kept flag per tensor");
  State::Group group;
  group.fill_allocates = fill_allocates;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const at::Tensor& tensor = tensors[t];
    TORCH_CHECK(tensor.has_storage(), "fabric: a tensor without storage cannot be released");
    c10::intrusive_ptr<c10::StorageImpl> storage =
        c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(tensor.storage().unsafeGetStorageImpl());
    // Tensors that share a storage (an LSTM's flattened weights): it is kept
    // if any of them is.
    const bool keep = !kept.empty() && kept[t];
    bool seen = false;
    for (size_t s = 0; s < group.storages.size(); ++s) {
      if (group.storages[s].get() != storage.get()) continue;
      seen = true;
      group.kept[s] = group.kept[s] || keep;
      group.storage_of_tensor.push_back(s);
    }
    if (seen) continue;
    group.storage_of_tensor.push_back(group.storages.size());
    group.bytes.push_back(storage->nbytes());
    group.kept.push_back(keep);
    group.storages.push_back(std::move(storage));
  }
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
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

void StorageMaterializer::release(size_t group) { state_->release(group); }

void StorageMaterializer::set_kept(size_t group, const std::vector<bool>& kept) {
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  State::Group& entry = state_->groups.at(group);
  TORCH_CHECK(kept.empty() || kept.size() == entry.storage_of_tensor.size(),
              "fabric: set_kept: one kept flag per tensor of the group");
  std::vector<bool> storages_kept(entry.storages.size(), false);
  for (size_t t = 0; t < kept.size(); ++t) {
    if (kept[t]) storages_kept[entry.storage_of_tensor[t]] = true;
  }
  // Checked before anything changes.
  for (size_t s = 0; s < entry.storages.size(); ++s) {
    TORCH_CHECK(entry.resident || !storages_kept[s] || entry.kept[s],
                "fabric: set_kept: a released group's tensor cannot start being kept; bring it back first");
  }
  for (size_t s = 0; s < entry.storages.size(); ++s) {
    if (!entry.resident && entry.kept[s] && !storages_kept[s]) free_storage(*entry.storages[s]);
    entry.kept[s] = storages_kept[s];
  }
}

void StorageMaterializer::release_all() {
  for (size_t group = 0; group < groups(); ++group) release(group);
}

void StorageMaterializer::set_release_others_on_demand(bool release) {
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  state_->release_others_on_demand = release;
}

void StorageMaterializer::pin_all() {
  {
    std::lock_guard<std::recursive_mutex> lock(state_->mutex);
    ++state_->pinned;
  }
  materialize_all();
}

void StorageMaterializer::unpin_all() {
  {
    std::lock_guard<std::recursive_mutex> lock(state_->mutex);
    if (state_->pinned == 0 || --state_->pinned > 0) return;
  }
  release_all();
}

void StorageMaterializer::abandon() {
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  state_->fill = nullptr;
}

void StorageMaterializer::materialize(size_t group) { state_->materialize(group, false); }

void StorageMaterializer::materialize_all() {
  for (size_t group = 0; group < groups(); ++group) materialize(group);
}

bool StorageMaterializer::resident(size_t group) const {
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  return state_->groups.at(group).resident;
}

size_t StorageMaterializer::groups() const {
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  return state_->groups.size();
}

uint64_t StorageMaterializer::materialized_on_demand() const { return state_->on_demand.load(); }

StorageMaterializer::Pause::Pause() : outer_(filling) { filling = true; }
StorageMaterializer::Pause::~Pause() { filling = outer_; }

}  // namespace detail
}  // namespace fabric
