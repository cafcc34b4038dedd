// The Tracer's statistics cache: a tensor seen again within one forward (a layer's output is the
// next layer's input and its container's output) reuses the statistics computed the first time.
//
// An entry is keyed by TensorImpl identity and is valid only while the tensor still has the same
// version counter value, storage offset, data pointer, sizes and strides; a weak reference pins
// the TensorImpl's address so that a freed tensor's address is never mistaken for a new tensor.
// Inference tensors (no version counter), non-strided layouts and nested tensors are never cached:
// an in-place change would go unnoticed (a nested tensor has no sizes to key on).
//
//   StatsCache<TensorStats> cache(/*max_entries=*/1 << 16);
//   if (std::optional<TensorStats> hit = cache.Find(t)) return *hit;
//   TensorStats s = Reduce(t);          // Without the cache's lock.
//   cache.Insert(t, s);
//
// Thread-safety: thread-safe. The cache's own mutex is held only for the lookup, the insert and
// Clear(), never while a caller reduces a tensor; two threads that miss on one tensor both reduce
// it, and the later Insert() wins (both values describe the same tensor). Callers must not hold it
// (it is private) and may hold their own locks around any method.
//
// Memory: at most `max_entries` entries; an Insert() into a full cache empties it first.
#ifndef TRACETORCH_AGENT_STATS_CACHE_H_
#define TRACETORCH_AGENT_STATS_CACHE_H_

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace tracetorch::agent {

template <typename V>
class StatsCache {
 public:
  explicit StatsCache(size_t max_entries) : max_entries_(max_entries) {}
  StatsCache(const StatsCache&) = delete;
  StatsCache& operator=(const StatsCache&) = delete;

  // Whether `t` may be cached at all (see above).
  static bool Cacheable(const at::Tensor& t) {
    return !t.is_inference() && t.unsafeGetTensorImpl()->version_counter().enabled() &&
           t.layout() == c10::kStrided && !t.is_nested();
  }

  // The value inserted for `t` if `t` has not changed since; nullopt otherwise (and for tensors
  // that are not Cacheable()).
  std::optional<V> Find(const at::Tensor& t) const ABSL_LOCKS_EXCLUDED(mu_) {
    if (!Cacheable(t)) return std::nullopt;
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    const uint32_t version = impl->version_counter().current_version();
    const int64_t storage_offset = t.storage_offset();
    const void* data = t.data_ptr();
    const auto sizes = t.sizes();
    const auto strides = t.strides();
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(impl);
    if (it == entries_.end()) return std::nullopt;
    const Key& k = it->second.key;
    if (k.version != version || k.storage_offset != storage_offset || k.data != data ||
        !std::equal(k.sizes.begin(), k.sizes.end(), sizes.begin(), sizes.end()) ||
        !std::equal(k.strides.begin(), k.strides.end(), strides.begin(), strides.end())) {
      return std::nullopt;
    }
    return it->second.value;
  }

  // Remembers `value` for `t` as it is now (a no-op for tensors that are not Cacheable()).
  void Insert(const at::Tensor& t, V value) ABSL_LOCKS_EXCLUDED(mu_) {
    if (!Cacheable(t)) return;
    Key key = KeyOf(t);
    // Made before the lock: a weak reference to the TensorImpl.
    Pin pin(t.getIntrusivePtr());
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key.impl);
    if (it == entries_.end()) {
      if (entries_.size() >= max_entries_) entries_.clear();
      it = entries_.try_emplace(key.impl).first;
    }
    Entry& e = it->second;
    e.pin = std::move(pin);
    e.key = std::move(key);
    e.value = std::move(value);
  }

  // Forgets every entry (a new forward begins).
  void Clear() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    entries_.clear();
  }

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return entries_.size();
  }

 private:
  using Pin = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

  struct Key {
    const c10::TensorImpl* impl = nullptr;
    uint32_t version = 0;
    int64_t storage_offset = 0;
    const void* data = nullptr;
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;
  };

  struct Entry {
    // Keeps the TensorImpl's address from being reused while cached (not its storage).
    Pin pin{c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
    Key key;
    V value;
  };

  static Key KeyOf(const at::Tensor& t) {
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    const auto sizes = t.sizes();
    const auto strides = t.strides();
    return Key{impl,
               impl->version_counter().current_version(),
               t.storage_offset(),
               t.data_ptr(),
               std::vector<int64_t>(sizes.begin(), sizes.end()),
               std::vector<int64_t>(strides.begin(), strides.end())};
  }

  const size_t max_entries_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<const c10::TensorImpl*, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_STATS_CACHE_H_
