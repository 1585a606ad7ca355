#include "vm/internal/stream_policy.h"

#include "core/device.h"
#include "vm/stream_wait_rule.h"

namespace sluice::vm {

Stream::Stream(ep::Stream* ep_stream, StreamPolicy* policy, ThreadCtx* thread_ctx, int dense_index)
    : ep_stream_(ep_stream),
      policy_(policy),
      thread_ctx_(thread_ctx),
      key_string_(ep_stream->key().ToString()),
      dense_index_(dense_index),
      poison_in_stream_order_(policy->poison_in_stream_order() && !policy->synchronous()),
      in_order_(ep_stream->key().type == StreamType::kCcl) {}

const char kStreamWaitRule[] =
    "two different streams of one asynchronous device, or cpu streams of two workers";

namespace {

StreamWaitFacts FactsOf(const Stream& stream) {
  return StreamWaitFacts{stream.key().device, stream.policy()->synchronous(),
                         static_cast<int64_t>(reinterpret_cast<intptr_t>(stream.thread_ctx()))};
}

}  // namespace

bool WaitsOnHost(const Stream& from, const Stream& to) {
  return WaitsOnHost(FactsOf(from), FactsOf(to));
}

bool CanStreamWait(const Stream& from, const Stream& to) {
  return CanStreamWait(FactsOf(from), FactsOf(to), &from == &to);
}

namespace {

class HostStreamPolicy final : public StreamPolicy {
 public:
  bool synchronous() const override { return true; }
  bool host_accessible() const override { return true; }
  void OnLaunched(Stream&, Instruction* instruction, Chain<Instruction>& done) override {
    done.PushBack(instruction);
  }
  void Flush(Stream&, CompletionWatcher&, Chain<Instruction>&) override {}
  void Collect(Stream&, Chain<Instruction>&) override {}
  bool HasUnretired(const Stream&) const override { return false; }
};

class AsyncStreamPolicy final : public StreamPolicy {
 public:
  explicit AsyncStreamPolicy(bool poison_in_stream_order)
      : poison_in_stream_order_(poison_in_stream_order) {}

  bool synchronous() const override { return false; }
  bool host_accessible() const override { return false; }
  bool poison_in_stream_order() const override { return poison_in_stream_order_; }

  void OnLaunched(Stream& stream, Instruction* instruction, Chain<Instruction>&) override {
    stream.unretired.push_back(instruction);
    ++stream.since_point;
  }

  void Flush(Stream& stream, CompletionWatcher& watcher, Chain<Instruction>& done) override {
    if (stream.since_point == 0) return;
    // Two pointers: fits the HostTask's inline storage, so a completion point never
    // allocates.
    Stream* s = &stream;
    CompletionWatcher* c = &watcher;
    const absl::Status launched = stream.ep_stream()->Launch([s, c]() {
      s->points_reached.fetch_add(1, std::memory_order_release);
      c->Poke();
      return absl::OkStatus();
    });
    if (!launched.ok()) {
      // The stream no longer takes work: wait for what it has, then everything is done.
      stream.ep_stream()->Sync().IgnoreError();
      Collect(stream, done);
      while (!stream.unretired.empty()) {
        done.PushBack(stream.unretired.front());
        stream.unretired.pop_front();
      }
      stream.since_point = 0;
      return;
    }
    stream.point_sizes.push_back(stream.since_point);
    stream.since_point = 0;
  }

  void Collect(Stream& stream, Chain<Instruction>& done) override {
    const uint64_t reached = stream.points_reached.load(std::memory_order_acquire);
    while (stream.points_seen < reached && !stream.point_sizes.empty()) {
      size_t n = stream.point_sizes.front();
      stream.point_sizes.pop_front();
      ++stream.points_seen;
      for (; n > 0; --n) {
        done.PushBack(stream.unretired.front());
        stream.unretired.pop_front();
      }
    }
  }

  bool HasUnretired(const Stream& stream) const override { return !stream.unretired.empty(); }

 private:
  const bool poison_in_stream_order_;
};

}  // namespace

std::unique_ptr<StreamPolicy> CreateStreamPolicy(const ep::Stream& stream) {
  switch (stream.key().device.type()) {
    case DeviceType::kCpu:
      return std::make_unique<HostStreamPolicy>();
    case DeviceType::kSim:
      return std::make_unique<AsyncStreamPolicy>(/*poison_in_stream_order=*/true);
    case DeviceType::kCuda:
      return std::make_unique<AsyncStreamPolicy>(/*poison_in_stream_order=*/false);
  }
  return std::make_unique<AsyncStreamPolicy>(/*poison_in_stream_order=*/false);
}

}  // namespace sluice::vm
