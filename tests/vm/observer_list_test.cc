// internal::ObserverList: every ExecutionObserver event reaches each observer of the list, in
// the list's order, with the arguments it was given; an observer that overrides nothing
// (the interface's no-op defaults) can sit in the list.
#include "vm/internal/observer_list.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vm/execution_observer.h"
#include "vm/instruction.h"

namespace sluice::vm::internal {
namespace {

using ::testing::ElementsAre;

// Instructions to name in events: the list passes pointers and references through without
// reading what they point to. The stream is a stand-in address for the same reason.
Instruction* FakeInstruction(int n) {
  static Instruction* const instructions = new Instruction[16];
  return &instructions[n];
}
const Stream& FakeStream() { return *reinterpret_cast<const Stream*>(FakeInstruction(15)); }

// Notes "<tag>:<event>" for each call, and checks the arguments it was given.
class Probe final : public ExecutionObserver {
 public:
  Probe(std::string tag, std::vector<std::string>* log) : tag_(std::move(tag)), log_(log) {}

  void OnBlobCreated(const std::shared_ptr<Blob>& blob, const Stream& stream) override {
    EXPECT_EQ(blob, nullptr);
    EXPECT_EQ(&stream, &FakeStream());
    Note("BlobCreated");
  }
  void OnSubmit(Instruction* instruction) override {
    EXPECT_EQ(instruction, FakeInstruction(1));
    Note("Submit");
  }
  void OnChainSubmitted(const Instruction* head) override {
    EXPECT_EQ(head, FakeInstruction(1));
    Note("ChainSubmitted");
  }
  void OnHostWaited(const Instruction& instruction) override {
    EXPECT_EQ(&instruction, FakeInstruction(2));
    Note("HostWaited");
  }
  void OnBarrierReceived(const Instruction& barrier) override {
    EXPECT_EQ(&barrier, FakeInstruction(3));
    Note("BarrierReceived");
  }
  void OnEagerReceived(Instruction* instruction) override {
    EXPECT_EQ(instruction, FakeInstruction(4));
    Note("EagerReceived");
  }
  void OnDoneEdge(const Instruction& done, Instruction* successor) override {
    EXPECT_EQ(&done, FakeInstruction(5));
    EXPECT_EQ(successor, FakeInstruction(6));
    Note("DoneEdge");
  }
  void OnRetired(const Instruction& instruction) override {
    EXPECT_EQ(&instruction, FakeInstruction(5));
    Note("Retired");
  }
  void OnEagerRetired(const Instruction& instruction) override {
    EXPECT_EQ(&instruction, FakeInstruction(5));
    Note("EagerRetired");
  }
  void OnBarrierFired(const Instruction& barrier) override {
    EXPECT_EQ(&barrier, FakeInstruction(3));
    Note("BarrierFired");
  }
  void OnLaunch(Instruction* instruction) override {
    EXPECT_EQ(instruction, FakeInstruction(7));
    Note("Launch");
  }
  void OnStepLaunch(Instruction* outer, const Instruction& step) override {
    EXPECT_EQ(outer, FakeInstruction(7));
    EXPECT_EQ(&step, FakeInstruction(8));
    Note("StepLaunch");
  }
  void OnSharedDrop(Instruction* outer, const Instruction& step) override {
    EXPECT_EQ(outer, FakeInstruction(7));
    EXPECT_EQ(&step, FakeInstruction(9));
    Note("SharedDrop");
  }
  void OnLastDrop(Instruction* outer, const Instruction& step) override {
    EXPECT_EQ(outer, FakeInstruction(7));
    EXPECT_EQ(&step, FakeInstruction(9));
    Note("LastDrop");
  }
  void OnNestedStepsDone(Instruction* outer) override {
    EXPECT_EQ(outer, FakeInstruction(7));
    Note("NestedStepsDone");
  }
  void OnControlExpanded(const Instruction& control,
                         absl::Span<const Instruction* const> steps) override {
    EXPECT_EQ(&control, FakeInstruction(10));
    EXPECT_EQ(steps.size(), 2u);
    Note("ControlExpanded");
  }
  void OnHostWrite(uint64_t seq, absl::Span<const uint8_t> bytes) override {
    EXPECT_EQ(seq, 11u);
    EXPECT_EQ(bytes.size(), 3u);
    Note("HostWrite");
  }

 private:
  void Note(const char* event) { log_->push_back(tag_ + ":" + event); }

  const std::string tag_;
  std::vector<std::string>* const log_;
};

// Overrides nothing.
class Silent final : public ExecutionObserver {};

// Reports every event once, in the order of the interface.
void ReportEveryEvent(ExecutionObserver& observer) {
  const Instruction* const steps[] = {FakeInstruction(12), FakeInstruction(13)};
  const uint8_t bytes[] = {1, 2, 3};
  observer.OnBlobCreated(nullptr, FakeStream());
  observer.OnSubmit(FakeInstruction(1));
  observer.OnChainSubmitted(FakeInstruction(1));
  observer.OnHostWaited(*FakeInstruction(2));
  observer.OnBarrierReceived(*FakeInstruction(3));
  observer.OnEagerReceived(FakeInstruction(4));
  observer.OnDoneEdge(*FakeInstruction(5), FakeInstruction(6));
  observer.OnRetired(*FakeInstruction(5));
  observer.OnEagerRetired(*FakeInstruction(5));
  observer.OnBarrierFired(*FakeInstruction(3));
  observer.OnLaunch(FakeInstruction(7));
  observer.OnStepLaunch(FakeInstruction(7), *FakeInstruction(8));
  observer.OnSharedDrop(FakeInstruction(7), *FakeInstruction(9));
  observer.OnLastDrop(FakeInstruction(7), *FakeInstruction(9));
  observer.OnNestedStepsDone(FakeInstruction(7));
  observer.OnControlExpanded(*FakeInstruction(10), steps);
  observer.OnHostWrite(11, bytes);
}

TEST(ObserverListTest, EachEventReachesEveryObserverInListOrder) {
  std::vector<std::string> log;
  Probe first("first", &log);
  Silent silent;
  Probe second("second", &log);
  ObserverList list({&first, &silent, &second});
  ReportEveryEvent(list);
  std::vector<std::string> expected;
  for (const char* event :
       {"BlobCreated", "Submit", "ChainSubmitted", "HostWaited", "BarrierReceived", "EagerReceived",
        "DoneEdge", "Retired", "EagerRetired", "BarrierFired", "Launch", "StepLaunch", "SharedDrop",
        "LastDrop", "NestedStepsDone", "ControlExpanded", "HostWrite"}) {
    expected.push_back(std::string("first:") + event);
    expected.push_back(std::string("second:") + event);
  }
  EXPECT_EQ(log, expected);
}

TEST(ObserverListTest, OrderIsTheListsNotTheCallers) {
  std::vector<std::string> log;
  Probe a("a", &log);
  Probe b("b", &log);
  ObserverList list({&b, &a});
  list.OnLaunch(FakeInstruction(7));
  list.OnHostWaited(*FakeInstruction(2));
  EXPECT_THAT(log, ElementsAre("b:Launch", "a:Launch", "b:HostWaited", "a:HostWaited"));
}

}  // namespace
}  // namespace sluice::vm::internal
