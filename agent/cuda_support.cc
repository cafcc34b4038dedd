#include "agent/cuda_support.h"

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

#else  // !TRACETORCH_WITH_CUDA

std::optional<DeviceMemory> SampleDeviceMemory(c10::Device /*device*/) { return std::nullopt; }

std::unique_ptr<DeviceTimer> DeviceTimer::Start(c10::Device /*device*/) { return nullptr; }

#endif

}  // namespace tracetorch::agent
