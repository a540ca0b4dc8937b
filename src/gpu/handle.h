// Move-only RAII owner of one WebGPU object: callers never call wgpu*Release themselves.
#pragma once

#include <utility>

namespace gerbil::gpu {

template <typename T, void (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T raw) : raw_(raw) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      raw_ = std::exchange(other.raw_, nullptr);
    }
    return *this;
  }
  ~Handle() { reset(); }

  T get() const { return raw_; }
  explicit operator bool() const { return raw_ != nullptr; }
  void reset() {
    if (raw_) Release(std::exchange(raw_, nullptr));
  }

 private:
  T raw_ = nullptr;
};

}  // namespace gerbil::gpu
