#include "agent/cuda_support.h"

#include <ATen/ATen.h>

#ifdef TRACETORCH_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace tracetorch::agent {

#ifdef TRACETORCH_WITH_CUDA

std::optional<DeviceMemory> SampleDeviceMemory(c10::Device device) {
  if (!device.is_cuda()) return std::nullopt;
  try {
    // StatType moved namespaces in torch 2.x; AGGREGATE is index 0 in every version.
    constexpr size_t kAggregate = 0;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return DeviceMemory{stats.allocated_bytes[kAggregate].current,
                        stats.reserved_bytes[kAggregate].current};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

namespace {

class CudaTimer final : public DeviceTimer {
 public:
  explicit CudaTimer(c10::Device device)
      : device_(device), start_(cudaEventDefault), end_(cudaEventDefault) {
    start_.record(at::cuda::getCurrentCUDAStream(device_.index()));
  }
  void Stop() override { end_.record(at::cuda::getCurrentCUDAStream(device_.index())); }
  bool Ready() override { return !end_.isCreated() || end_.query(); }
  std::optional<double> ElapsedMs(bool wait) override {
    if (!end_.isCreated()) return std::nullopt;
    if (!end_.query()) {
      if (!wait) return std::nullopt;
      end_.synchronize();
    }
    return static_cast<double>(start_.elapsed_time(end_));
  }

 private:
  const c10::Device device_;
  at::cuda::CUDAEvent start_;
  at::cuda::CUDAEvent end_;
};

}  // namespace

std::unique_ptr<DeviceTimer> DeviceTimer::Start(c10::Device device) {
  if (!device.is_cuda()) return nullptr;
  try {
    return std::make_unique<CudaTimer>(device);
  } catch (const std::exception&) {
    return nullptr;
  }
}

namespace {

// The event recorded after a non-blocking copy: the copied values are readable once it completes.
class EventCompletion final : public Completion {
 public:
  explicit EventCompletion(c10::Device device) : event_(cudaEventDisableTiming) {
    event_.record(at::cuda::getCurrentCUDAStream(device.index()));
  }
  bool Done() override { return event_.query(); }

 private:
  at::cuda::CUDAEvent event_;
};

}  // namespace

at::Tensor CopyToHostAsync(const at::Tensor& values, std::unique_ptr<Completion>* done) {
  done->reset();
  if (values.device().is_cpu()) return values;
  if (!values.is_cuda()) return values.to(at::kCPU);
  at::Tensor host =
      at::empty(values.sizes(), values.options().device(at::kCPU).pinned_memory(true));
  host.copy_(values, /*non_blocking=*/true);
  *done = std::make_unique<EventCompletion>(values.device());
  return host;
}

#else  // !TRACETORCH_WITH_CUDA

at::Tensor CopyToHostAsync(const at::Tensor& values, std::unique_ptr<Completion>* done) {
  done->reset();
  return values.device().is_cpu() ? values : values.to(at::kCPU);
}

std::optional<DeviceMemory> SampleDeviceMemory(c10::Device /*device*/) { return std::nullopt; }

std::unique_ptr<DeviceTimer> DeviceTimer::Start(c10::Device /*device*/) { return nullptr; }

#endif

}  // namespace tracetorch::agent
