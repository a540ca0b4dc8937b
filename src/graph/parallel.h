// Runs independent work items on every core: the weight upload's pieces, the prompt lengths traced for their
// pipelines.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gerbil::graph {

// Calls body(i) for every i in [0, count), on up to one thread per core (the caller's among them). The first
// exception stops the items not yet started and is rethrown once all threads are done.
template <typename Body>
void parallel_for(size_t count, Body&& body) {
  std::atomic<size_t> next = 0;
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = count;
      }
    }
  };
  size_t workers = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), count);
  std::vector<std::thread> threads;
  for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (auto& thread : threads) thread.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace gerbil::graph
