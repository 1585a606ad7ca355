// Recorder -> RecordReader -> Replayer round trips (eager, precomputed, host writes and
// reads, releases, device mapping), proof that replay verification can fail (tampered
// checksums and data), and the reader's errors for corrupt and truncated files.
#include "vm/replayer.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/read_file.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/record_reader.h"
#include "vm/recorder.h"
#include "vm/sync_checker.h"

namespace sluice::vm::replayer_test {
namespace {

using ::sluice::testing::ReadFile;
using ::testing::HasSubstr;
using testing::VmHarness;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/replayer_test_", name, ".rec");
}

// Records a program that uses every instruction kind the recorder writes: eager ops on
// cpu and both sim devices (so soft sync adds StreamWait and RecordEvent), host writes and
// reads, a release, a precomputed batch with edges, and Sync barriers. Returns the path.
std::string RecordProgram(const std::string& name) {
  const std::string path = TempPath(name);
  VmOptions options;
  options.record_path = path;
  VmHarness h(options);
  BlobRef a = h.NewF32("cpu", 16, "a");
  BlobRef b = h.NewF32("sim:0", 16, "b");
  BlobRef c = h.NewF32("sim:1", 16, "c");
  BlobRef scratch = h.NewF32("sim:0/h2d", 16, "scratch");
  std::vector<float> input(16);
  for (int i = 0; i < 16; ++i) input[i] = 0.25f * static_cast<float>(i) - 1.0f;
  EXPECT_TRUE(h.Write(a, input).ok());
  EXPECT_TRUE(h.Fill(b, 3.0, "sim:0").ok());
  EXPECT_TRUE(h.builder->Call(h.K("copy"), {a}, {scratch}, AttrMap(), h.S("sim:0/h2d")).ok());
  EXPECT_TRUE(h.Add(scratch, b, b, "sim:0").ok());
  EXPECT_TRUE(h.builder->Call(h.K("copy"), {b}, {c}, AttrMap(), h.S("sim:1")).ok());
  EXPECT_TRUE(h.builder
                  ->Call(h.K("scale"), {c}, {c}, AttrMap().Set("alpha", 0.5).Set("beta", 1.0),
                         h.S("sim:1/compute:1"))
                  .ok());
  EXPECT_TRUE(h.builder->Release(scratch).ok());
  EXPECT_TRUE(h.Read(c).ok());
  EXPECT_TRUE(h.vm->Sync().ok());

  // A precomputed batch over b and c on sim:0 with a device-side wait between streams.
  PrecomputedBatch batch;
  const int mul = batch.AddOpCall(h.K("mul"), {b, b}, {b}, nullptr, h.S("sim:0"));
  const int wait = batch.AddStreamWait({b}, h.S("sim:0"), h.S("sim:0/compute:1"));
  const int add = batch.AddOpCall(h.K("add"), {b, b}, {b}, nullptr, h.S("sim:0/compute:1"));
  EXPECT_TRUE(batch.AddEdge(mul, wait).ok());
  EXPECT_TRUE(batch.AddEdge(wait, add).ok());
  EXPECT_TRUE(batch.Submit(h.vm.get()).ok());
  EXPECT_TRUE(h.vm->Sync().ok());
  EXPECT_TRUE(h.vm->Shutdown().ok());
  return path;
}

KernelLookup Lookup(VmHarness& h) {
  return [&h](absl::string_view op, const StreamKey&, DataType) { return h.kernels.Find(op); };
}

absl::StatusOr<ReplayResult> Replay(const std::string& path, ReplayOptions options = {},
                                    VmOptions vm_options = {}) {
  absl::StatusOr<RecordedProgram> program = ReadRecordFile(path);
  if (!program.ok()) return program.status();
  VmHarness h(vm_options);
  absl::StatusOr<std::unique_ptr<Replayer>> replayer =
      Replayer::Create(h.vm.get(), &*program, Lookup(h), std::move(options));
  if (!replayer.ok()) return replayer.status();
  return (*replayer)->Run();
}

TEST(ReplayerTest, RecordedFileHoldsEveryInstructionKind) {
  const std::string text = ReadFile(RecordProgram("kinds"));
  EXPECT_THAT(text, ::testing::StartsWith("sluice-instructions 4\n"));
  for (const char* needle :
       {"\nblob ", "\nop ", " fill ", " copy ", "\nwait ", "\nrecord ", "\nrelease ", "\naccess ",
        " write blob=", " read blob=", "\ndata ", "\nbarrier ", "\nbatch 3\n", " after=0\n",
        "\nchecksum ", "alpha=f:0.5"}) {
    EXPECT_THAT(text, HasSubstr(needle));
  }
  EXPECT_THAT(text, ::testing::EndsWith("\nend\n"));
}

TEST(ReplayerTest, RoundTripMatchesEveryChecksum) {
  const std::string path = RecordProgram("round_trip");
  absl::StatusOr<RecordedProgram> program = ReadRecordFile(path);
  ASSERT_TRUE(program.ok()) << program.status();
  // a, b, c are alive at shutdown; scratch was released.
  EXPECT_EQ(program->checksums.size(), 3u);
  EXPECT_EQ(program->batch_size, std::vector<int>({3}));

  for (auto scheduling :
       {VmOptions::Scheduling::kDedicatedThread, VmOptions::Scheduling::kCallerThread}) {
    VmOptions vm_options;
    vm_options.scheduling = scheduling;
    vm_options.check_sync = true;
    VmHarness h(vm_options);
    absl::StatusOr<std::unique_ptr<Replayer>> replayer =
        Replayer::Create(h.vm.get(), &*program, Lookup(h));
    ASSERT_TRUE(replayer.ok()) << replayer.status();
    for (int run = 0; run < 3; ++run) {
      absl::StatusOr<ReplayResult> result = (*replayer)->Run();
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->instructions, static_cast<int64_t>(program->instructions.size()));
      EXPECT_EQ(result->checksums_compared, 3);
      EXPECT_TRUE(result->mismatches.empty())
          << result->mismatches[0].blob << " line " << result->mismatches[0].line;
      EXPECT_TRUE(result->op_error.ok()) << result->op_error;
    }
    EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0);
    // Replayed as recorded: the sync instructions come from the file, none are added.
    const VmStats stats = h.vm->stats();
    int64_t recorded_waits = 0;
    for (const RecordedInstruction& r : program->instructions) {
      recorded_waits += r.kind == InstructionKind::kStreamWait;
    }
    EXPECT_EQ(stats.stream_waits, 3 * recorded_waits);
  }
}

TEST(ReplayerTest, TamperedChecksumIsReportedWithItsLine) {
  const std::string path = RecordProgram("tampered_checksum");
  std::string text = ReadFile(path);
  const size_t at = text.find("\nchecksum ");
  ASSERT_NE(at, std::string::npos);
  const size_t digit = text.find(' ', at + 10) + 1;  // first hex digit of the checksum
  text[digit] = text[digit] == '0' ? '1' : '0';
  const std::string tampered = TempPath("tampered_checksum_edit");
  WriteFile(tampered, text);
  const int line = static_cast<int>(std::count(text.begin(), text.begin() + at + 1, '\n')) + 1;

  absl::StatusOr<ReplayResult> result = Replay(tampered);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->mismatches.size(), 1u);
  EXPECT_EQ(result->mismatches[0].line, line);
  EXPECT_NE(result->mismatches[0].actual, result->mismatches[0].expected);
}

TEST(ReplayerTest, ReplayUsesRecordedHostData) {
  // Changing the bytes a host write put in changes what the replay computes.
  const std::string path = RecordProgram("tampered_data");
  std::string text = ReadFile(path);
  const size_t at = text.find("\ndata ");
  ASSERT_NE(at, std::string::npos);
  const size_t digit = text.find(' ', at + 6) + 1;
  text[digit] = text[digit] == '4' ? '5' : '4';
  const std::string tampered = TempPath("tampered_data_edit");
  WriteFile(tampered, text);
  absl::StatusOr<ReplayResult> result = Replay(tampered);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->mismatches.empty());
}

// Replays the record at `path` with `mapping`, under the sync checker: every checksum
// matches, no kernel error, no unordered access. Returns the streams the replay used.
std::vector<StreamKey> ReplayMappedCleanly(const std::string& path, const std::string& mapping) {
  ReplayOptions options;
  EXPECT_TRUE(AddDeviceMapping(mapping, &options.device_map).ok());
  VmOptions vm_options;
  vm_options.check_sync = true;
  absl::StatusOr<RecordedProgram> program = ReadRecordFile(path);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  VmHarness h(vm_options);
  absl::StatusOr<std::unique_ptr<Replayer>> replayer =
      Replayer::Create(h.vm.get(), &*program, Lookup(h), options);
  EXPECT_TRUE(replayer.ok()) << replayer.status();
  if (!replayer.ok()) return {};
  absl::StatusOr<ReplayResult> result = (*replayer)->Run();
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  EXPECT_TRUE(result->op_error.ok()) << result->op_error;
  EXPECT_TRUE(result->mismatches.empty());
  EXPECT_EQ(result->checksums_compared, 3);
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0);
  std::vector<StreamKey> used;
  for (Stream* stream : h.vm->streams()) used.push_back(stream->key());
  return used;
}

TEST(ReplayerTest, DeviceMapRunsSim1OnSim0) {
  const std::vector<StreamKey> used =
      ReplayMappedCleanly(RecordProgram("device_map"), "sim:1=sim:0");
  EXPECT_FALSE(used.empty());
  for (const StreamKey& key : used) {
    EXPECT_NE(key.device, Device(DeviceType::kSim, 1)) << key.ToString();
  }
}

// Records idle host writes (VirtualMachine::WriteIdleHostBlobs, as a graph's feeds between
// runs) of a cpu blob and of sim blobs last used on another stream of their device, with
// work before and after them; returns the path.
std::string RecordIdleHostWrites(const std::string& name) {
  const std::string path = TempPath(name);
  VmOptions options;
  options.record_path = path;
  VmHarness h(options);
  BlobRef a = h.NewF32("sim:0", 16, "a");
  BlobRef b = h.NewF32("cpu", 16, "b");
  BlobRef c = h.NewF32("sim:1", 16, "c");
  BlobRef d = h.NewF32("sim:0", 16, "d");
  EXPECT_TRUE(h.Fill(a, 2.0, "sim:0/compute:1").ok());
  EXPECT_TRUE(h.Fill(c, 5.0, "sim:1").ok());
  EXPECT_TRUE(h.vm->Sync().ok());
  std::vector<float> av(16), bv(16), cv(16);
  for (int i = 0; i < 16; ++i) {
    av[i] = 0.5f * static_cast<float>(i);
    bv[i] = 1.0f - static_cast<float>(i);
    cv[i] = 3.0f + static_cast<float>(i);
  }
  auto bytes = [](const std::vector<float>& v) {
    return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
  };
  const VirtualMachine::HostBlobWrite writes[] = {
      {&a, bytes(av)}, {&b, bytes(bv)}, {&c, bytes(cv)}};
  EXPECT_TRUE(h.vm->WriteIdleHostBlobs(writes).ok());
  EXPECT_TRUE(h.Add(a, a, d, "sim:0").ok());
  EXPECT_TRUE(h.builder->Call(h.K("copy"), {c}, {a}, AttrMap(), h.S("sim:0")).ok());
  absl::StatusOr<std::vector<float>> got = h.Read(d);
  EXPECT_TRUE(got.ok());
  if (got.ok()) EXPECT_EQ((*got)[3], 3.0f);  // 2 * 1.5: the written bytes, not the fill
  EXPECT_TRUE(h.vm->Shutdown().ok());
  return path;
}

TEST(ReplayerTest, RecordedIdleHostWritesReplayWithTheirChecksums) {
  const std::string path = RecordIdleHostWrites("idle_host_writes");
  absl::StatusOr<RecordedProgram> program = ReadRecordFile(path);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->checksums.size(), 4u);
  for (const std::string mapping : {"", "sim:1=sim:0"}) {  // as recorded, and remapped
    ReplayOptions options;
    if (!mapping.empty()) ASSERT_TRUE(AddDeviceMapping(mapping, &options.device_map).ok());
    VmOptions vm_options;
    vm_options.check_sync = true;
    VmHarness h(vm_options);
    absl::StatusOr<std::unique_ptr<Replayer>> replayer =
        Replayer::Create(h.vm.get(), &*program, Lookup(h), options);
    ASSERT_TRUE(replayer.ok()) << replayer.status();
    absl::StatusOr<ReplayResult> result = (*replayer)->Run();
    ASSERT_TRUE(result.ok()) << mapping << ": " << result.status();
    EXPECT_TRUE(result->op_error.ok()) << result->op_error;
    EXPECT_TRUE(result->mismatches.empty()) << mapping;
    EXPECT_EQ(result->checksums_compared, 4) << mapping;
    EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << mapping;
  }
}

TEST(ReplayerTest, DeviceMapErrors) {
  DeviceMap map;
  EXPECT_THAT(AddDeviceMapping("sim:1", &map).message(), HasSubstr("expected FROM=TO"));
  EXPECT_THAT(AddDeviceMapping("gpu:0=sim:0", &map).message(), HasSubstr("gpu"));
  ASSERT_TRUE(AddDeviceMapping("cuda:0=sim:0,cuda:1=sim:1", &map).ok());
  EXPECT_THAT(AddDeviceMapping("cuda:0=sim:1", &map).message(), HasSubstr("mapped twice"));

  // A device the runtime does not have: the error names the line of the first use.
  const std::string path = RecordProgram("missing_device");
  ReplayOptions options;
  ASSERT_TRUE(AddDeviceMapping("sim:1=sim:9", &options.device_map).ok());
  absl::StatusOr<ReplayResult> result = Replay(path, options);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr(path + ":"));
  EXPECT_THAT(result.status().message(), HasSubstr("sim:9"));
}

// Mapping sim:0 onto cpu puts its StreamWait lines between cpu streams of one worker, where
// a device-side wait means nothing: they replay as record events (the soft sync the builder
// writes for such a pair) and every checksum still matches, under the sync checker.
TEST(ReplayerTest, DeviceMapOntoCpuReplaysStreamWaitsAsRecords) {
  const std::string path = RecordProgram("to_cpu");
  ASSERT_THAT(ReadFile(path), HasSubstr("\nwait "));
  EXPECT_FALSE(ReplayMappedCleanly(path, "sim:0=cpu,sim:1=cpu").empty());
}

// A barrier inside a batch (the reader accepts the line) has no stream: refused by Create,
// naming the line, instead of being replayed.
TEST(ReplayerTest, BarrierInsideABatchIsRefused) {
  absl::StatusOr<RecordedProgram> program = ParseRecord(
      "sluice-instructions 4\n"
      "blob 1 cpu f32 4 cpu/compute\n"
      "batch 2\n"
      "op 1 cpu/compute fill in= out=1 after= attrs=\n"
      "barrier 2 after=0\n"
      "end\n",
      "barrier.rec");
  ASSERT_TRUE(program.ok()) << program.status();
  VmHarness h;
  absl::StatusOr<std::unique_ptr<Replayer>> replayer =
      Replayer::Create(h.vm.get(), &*program, Lookup(h));
  ASSERT_FALSE(replayer.ok());
  EXPECT_THAT(replayer.status().message(), HasSubstr("barrier.rec:5"));
  EXPECT_THAT(replayer.status().message(), HasSubstr("barrier inside a batch"));
}

TEST(ReplayerTest, UnknownKernelNamesTheLine) {
  std::string text = ReadFile(RecordProgram("unknown_kernel"));
  absl::StrReplaceAll({{" scale ", " frobnicate "}}, &text);
  absl::StatusOr<RecordedProgram> program = ParseRecord(text, "edited.rec");
  ASSERT_TRUE(program.ok()) << program.status();
  VmHarness h;
  absl::StatusOr<std::unique_ptr<Replayer>> replayer =
      Replayer::Create(h.vm.get(), &*program, Lookup(h));
  ASSERT_FALSE(replayer.ok());
  EXPECT_EQ(replayer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(replayer.status().message(), HasSubstr("edited.rec:"));
  EXPECT_THAT(replayer.status().message(), HasSubstr("frobnicate"));
}

struct BadRecord {
  const char* what;
  std::string text;
  absl::StatusCode code;
  const char* message;
};

TEST(RecordReaderTest, CorruptAndTruncatedFilesNameTheLine) {
  const std::string header = "sluice-instructions 1\n";
  const std::string blob = "blob 1 cpu f32 4 cpu/compute x\n";
  const std::string write = "access 1 cpu/compute write blob=1\n";
  const std::vector<BadRecord> cases = {
      {"empty", "", absl::StatusCode::kDataLoss, "empty file"},
      {"not a record", "hello\n", absl::StatusCode::kInvalidArgument, "r:1: not an instruction"},
      {"version", "sluice-instructions 7\nend\n", absl::StatusCode::kInvalidArgument,
       "r:1: unsupported format version 7"},
      {"no end", header + blob, absl::StatusCode::kDataLoss, "r:2: truncated"},
      {"cut mid-line", header + blob + "op 3 cpu/compute fi", absl::StatusCode::kDataLoss,
       "r:3: truncated: the file ends inside this line (byte offset 53"},
      {"unknown directive", header + "jump 3\nend\n", absl::StatusCode::kInvalidArgument,
       "r:2: unknown directive 'jump'"},
      {"blob before declared", header + "op 1 cpu/compute fill in= out=4 attrs=\nend\n",
       absl::StatusCode::kInvalidArgument, "r:2: blob 4 is used before its 'blob' line"},
      {"bad number", header + "op x cpu/compute fill in= out= attrs=\nend\n",
       absl::StatusCode::kInvalidArgument, "r:2: bad sequence number 'x'"},
      {"bad dtype", header + "blob 1 cpu f99 4 cpu/compute\nend\n",
       absl::StatusCode::kInvalidArgument, "r:2:"},
      {"bad attrs", header + blob + "op 2 cpu/compute fill in= out=1 attrs=value=q:1\nend\n",
       absl::StatusCode::kInvalidArgument, "r:3:"},
      {"duplicate blob", header + blob + blob + "end\n", absl::StatusCode::kInvalidArgument,
       "r:3: blob 1 declared twice"},
      {"batch cut by end",
       header + blob + "batch 2\nop 2 cpu/compute fill in= out=1 after= attrs=\nend\n",
       absl::StatusCode::kInvalidArgument, "r:5: 'end' inside a batch"},
      {"batch edge forward",
       header + blob + "batch 1\nop 2 cpu/compute fill in= out=1 after=0 attrs=\nend\n",
       absl::StatusCode::kInvalidArgument, "r:4: predecessor 0 is not an earlier"},
      {"batch without after",
       header + blob + "batch 1\nop 2 cpu/compute fill in= out=1 attrs=\nend\n",
       absl::StatusCode::kInvalidArgument, "r:4: expected 'after=...'"},
      {"data odd", header + blob + write + "data 1 abc\nend\n", absl::StatusCode::kInvalidArgument,
       "r:4: odd number of hex digits"},
      {"data not hex", header + blob + write + "data 1 zz\nend\n",
       absl::StatusCode::kInvalidArgument, "r:4: bad hex digit"},
      {"data size", header + blob + write + "data 1 00\nend\n", absl::StatusCode::kInvalidArgument,
       "r:4: data for #1 has 1 bytes; blob 1 holds 16"},
      {"data for a read", header + blob + "access 1 cpu/compute read blob=1\ndata 1 00\nend\n",
       absl::StatusCode::kInvalidArgument, "r:4: data for #1, which is not"},
      {"checksum", header + blob + "checksum 1 12\nend\n", absl::StatusCode::kInvalidArgument,
       "r:3: bad checksum '12'"},
      {"after end", header + "end\nop 1\n", absl::StatusCode::kInvalidArgument,
       "r:3: content after the 'end' line"},
      {"trailing token", header + blob + "release 2 cpu/compute blob=1 extra\nend\n",
       absl::StatusCode::kInvalidArgument, "r:3: unexpected 'extra'"},
  };
  for (const BadRecord& c : cases) {
    absl::StatusOr<RecordedProgram> program = ParseRecord(c.text, "r");
    ASSERT_FALSE(program.ok()) << c.what;
    EXPECT_EQ(program.status().code(), c.code) << c.what << ": " << program.status();
    EXPECT_THAT(program.status().message(), HasSubstr(c.message)) << c.what;
  }
}

TEST(RecordReaderTest, ParsesAWellFormedRecord) {
  const std::string text =
      "sluice-instructions 1\n"
      "blob 4 sim:0 f32 2x3 sim:0/compute w\n"
      "access 7 sim:0/compute write blob=4\n"
      "batch 2\n"
      "op 8 sim:0/compute scale in=4 out=4 after= attrs=alpha=f:2,beta=f:0\n"
      "wait 9 sim:0/compute sim:0/h2d blobs=4 after=0\n"
      "barrier 10\n"
      "data 7 " +
      std::string(48, 'a') +
      "\n"
      "checksum 4 00000000000000ff\n"
      "end\n";
  absl::StatusOr<RecordedProgram> program = ParseRecord(text);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->blobs.size(), 1u);
  EXPECT_EQ(program->blobs[0].shape, Shape({2, 3}));
  EXPECT_EQ(program->blobs[0].name, "w");
  ASSERT_EQ(program->instructions.size(), 4u);
  EXPECT_EQ(program->instructions[0].data, 0);
  EXPECT_EQ(program->data[0], std::vector<uint8_t>(24, 0xaa));
  EXPECT_EQ(program->instructions[1].batch, 0);
  EXPECT_EQ(program->instructions[1].attrs->GetFloat("alpha").value(), 2.0);
  EXPECT_EQ(program->instructions[2].after, std::vector<int>({0}));
  EXPECT_EQ(program->instructions[2].wait_target, "sim:0/h2d");
  EXPECT_EQ(program->instructions[3].kind, InstructionKind::kBarrier);
  EXPECT_EQ(program->instructions[3].batch, -1);
  ASSERT_EQ(program->checksums.size(), 1u);
  EXPECT_EQ(program->checksums[0].checksum, 0xffu);
  EXPECT_EQ(program->checksums[0].line, 9);
}

TEST(RecordReaderTest, MissingFileIsNotFound) {
  absl::StatusOr<RecordedProgram> program = ReadRecordFile("/nonexistent/dir/x.rec");
  EXPECT_EQ(program.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(program.status().message(), HasSubstr("/nonexistent/dir/x.rec"));
}

}  // namespace
}  // namespace sluice::vm::replayer_test
