// Fork awareness for code that lives inside another program. After fork() only the calling
// thread exists in the child; mutexes other threads held stay locked there for ever and their
// threads are gone. An object made before the fork must therefore go inert in the child: touch no
// lock, join no thread, write to no shared socket.
//
// ForkEpoch() is 0 in the process that first asked (or any process that never forked) and is
// bumped in the child by a pthread_atfork handler (installed on first use, once per process), so a
// check is one relaxed atomic load.
//
// Example:
//   class Sender {
//     bool Send() { if (owner_.InForkedChild()) return false; ... }
//     ForkOwner owner_;  // Remembers the epoch it was made in.
//   };
//
// Thread-safe.
#ifndef TRACETORCH_GUEST_FORK_H_
#define TRACETORCH_GUEST_FORK_H_

#include <cstdint>

namespace tracetorch::guest {

// The current fork epoch (see above).
uint64_t ForkEpoch();

// The epoch an object was made in; InForkedChild() once the object finds itself in a child.
class ForkOwner {
 public:
  ForkOwner() : epoch_(ForkEpoch()) {}
  bool InForkedChild() const { return ForkEpoch() != epoch_; }

 private:
  const uint64_t epoch_;
};

}  // namespace tracetorch::guest

#endif  // TRACETORCH_GUEST_FORK_H_
