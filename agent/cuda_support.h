// CUDA measurements for the tracer: caching-allocator memory and event timing.
//
// Compiled for real only with the CMake option TRACETORCH_WITH_CUDA (a CUDA build of libtorch:
// c10_cuda and the CUDA headers). Debian's libtorch is CPU-only: there every function reports
// "unavailable" (nullopt / nullptr) and the record's memory fields stay null, as on a CPU run.
//
// Compiles against torch 1.13 to 2.x (only APIs both have: at::cuda::CUDAEvent, the caching
// allocator's getDeviceStats, pinned_memory in TensorOptions, Tensor::copy_ with non_blocking).
//
// Thread-safety: the functions are thread-safe; a DeviceTimer is used by one thread at a time.
#ifndef TRACETORCH_AGENT_CUDA_SUPPORT_H_
#define TRACETORCH_AGENT_CUDA_SUPPORT_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "agent/pending_results.h"

namespace tracetorch::agent {

// Bytes currently allocated and reserved by the CUDA caching allocator on one device.
struct DeviceMemory {
  int64_t allocated = 0;
  int64_t reserved = 0;
};

// nullopt unless built with CUDA and `device` is a CUDA device.
std::optional<DeviceMemory> SampleDeviceMemory(c10::Device device);

// Times GPU work between Start and Stop with two CUDA events on the device's current stream, read
// later without synchronising the device after every module.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  // Records the start event. nullptr unless built with CUDA and `device` is a CUDA device.
  static std::unique_ptr<DeviceTimer> Start(c10::Device device);
  // Records the end event.
  virtual void Stop() = 0;
  // True once the end event has completed (or was never recorded: nothing to wait for). Never
  // blocks.
  virtual bool Ready() = 0;
  // Milliseconds between the events once the end event has completed; with `wait` it blocks until
  // then, otherwise it returns nullopt while the GPU is still busy.
  virtual std::optional<double> ElapsedMs(bool wait) = 0;
};

// Brings `values` (a small tensor the device is still computing) to host memory without waiting
// for the device. CUDA: a pinned host tensor filled by a non-blocking copy on the device's current
// stream, and in `*done` the Completion of a CUDA event recorded after the copy (the values may be
// read once it is Done()). CPU: `values` itself and `*done` = nullptr (complete). Another device
// (built without CUDA support for it): a blocking copy, `*done` = nullptr. May throw c10::Error.
at::Tensor CopyToHostAsync(const at::Tensor& values, std::unique_ptr<Completion>* done);

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_CUDA_SUPPORT_H_
