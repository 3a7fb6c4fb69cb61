// ChunkWriter: files cut anywhere stay readable up to their last whole chunk, and a write that
// fails part way (here: the file size limit) leaves a file that ends with a whole chunk.
#include "emo/runtime/chunk_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "runtime/chunk_walker.h"

namespace emo::runtime {
namespace {

namespace fmt = trace::emo_format;

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()))).string();
}

// Payloads of three kinds: random bytes (deflate cannot shrink them: stored raw), repetitive
// records (deflated), and empty.
std::vector<unsigned char> Payload(std::mt19937_64& rng, int which) {
  std::vector<unsigned char> p;
  if (which == 0) {
    p.resize(std::uniform_int_distribution<size_t>(1, 3000)(rng));
    for (auto& b : p) b = static_cast<unsigned char>(rng());
  } else if (which == 1) {
    const size_t n = std::uniform_int_distribution<size_t>(1, 400)(rng);
    for (size_t i = 0; i < n; ++i) {
      fmt::KernelRecord k{};
      k.start_ns = static_cast<int64_t>(1000 * i);
      k.end_ns = k.start_ns + 500;
      k.name = static_cast<uint32_t>(i % 7);
      unsigned char buffer[sizeof(fmt::RecordHeader) + sizeof(k)];
      const size_t bytes = fmt::PutRecord(buffer, fmt::RecordType::kKernel, k);
      p.insert(p.end(), buffer, buffer + bytes);
    }
  }
  return p;
}

TEST(ChunkWriterTest, EveryWholeChunkBeforeACutIsRead) {
  const std::string path = TempPath("emo_chunks");
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  std::mt19937_64 rng(11);
  std::vector<Chunk> written;
  std::vector<uint64_t> ends;  // file size after each chunk
  {
    ChunkWriter writer;
    ASSERT_TRUE(writer.Start(fd));
    EXPECT_EQ(writer.bytes_written(), sizeof(fmt::FileHeader));
    for (int i = 0; i < 60; ++i) {
      Chunk c;
      c.kind = static_cast<uint32_t>(i % 3 == 0 ? fmt::ChunkKind::kMeta : fmt::ChunkKind::kRecords);
      c.payload = Payload(rng, i % 3);
      c.count = static_cast<uint32_t>(i);
      ASSERT_TRUE(writer.Write(static_cast<fmt::ChunkKind>(c.kind), c.count, c.payload.data(), c.payload.size(),
                               /*compress=*/i % 2 == 0));
      ends.push_back(writer.bytes_written());
      written.push_back(std::move(c));
    }
    std::vector<unsigned char> strings;
    AppendStringEntry(7, "ampere_sgemm_128x64_nn", &strings);
    AppendStringEntry(8, "", &strings);
    ASSERT_TRUE(writer.Write(fmt::ChunkKind::kStrings, 2, strings.data(), strings.size(), true));
    ends.push_back(writer.bytes_written());
    written.push_back(Chunk{static_cast<uint32_t>(fmt::ChunkKind::kStrings), 2, strings});
    ASSERT_TRUE(writer.Write(fmt::ChunkKind::kEnd, 0, nullptr, 0, false));
    ends.push_back(writer.bytes_written());
    written.push_back(Chunk{static_cast<uint32_t>(fmt::ChunkKind::kEnd), 0, {}});
    EXPECT_FALSE(writer.failed());
  }
  const std::vector<unsigned char> file = ReadFile(path);
  std::remove(path.c_str());
  ASSERT_EQ(file.size(), ends.back());

  // The whole file: every chunk, byte for byte.
  const std::vector<Chunk> all = WalkChunks(file);
  ASSERT_EQ(all.size(), written.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].kind, written[i].kind) << i;
    EXPECT_EQ(all[i].count, written[i].count) << i;
    EXPECT_EQ(all[i].payload, written[i].payload) << i;
  }
  // The strings chunk holds {id, length, bytes} entries.
  const std::vector<unsigned char>& s = all[all.size() - 2].payload;
  ASSERT_EQ(s.size(), 8u + 22u + 8u);
  uint32_t id = 0;
  uint32_t length = 0;
  std::memcpy(&id, s.data(), 4);
  std::memcpy(&length, s.data() + 4, 4);
  EXPECT_EQ(id, 7u);
  EXPECT_EQ(length, 22u);
  EXPECT_EQ(std::string(s.begin() + 8, s.begin() + 30), "ampere_sgemm_128x64_nn");

  // Cut anywhere: exactly the chunks that end at or before the cut come back.
  std::vector<size_t> cuts = {0, 1, sizeof(fmt::FileHeader) - 1, sizeof(fmt::FileHeader), file.size() - 1};
  for (const uint64_t end : ends) cuts.insert(cuts.end(), {end - 1, end, end + 1});
  for (int i = 0; i < 300; ++i) cuts.push_back(std::uniform_int_distribution<size_t>(0, file.size())(rng));
  for (const size_t cut : cuts) {
    if (cut > file.size()) continue;
    const std::vector<unsigned char> prefix(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(cut));
    size_t expected = 0;
    while (expected < ends.size() && ends[expected] <= cut) ++expected;
    EXPECT_EQ(WalkChunks(prefix).size(), expected) << "cut at " << cut;
  }
}

TEST(ChunkWriterTest, FullDiskLeavesWholeChunksAndSaysWhy) {
  // A child process writes under a file size limit (EFBIG stands in for ENOSPC; both are a
  // full disk to the writer) so the limit never touches this process.
  const std::string path = TempPath("emo_full");
  constexpr rlim_t kLimit = 20000;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{kLimit, kLimit};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(3);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(4);
    ChunkWriter writer;
    if (!writer.Start(fd)) _exit(5);
    std::mt19937_64 rng(3);
    std::vector<unsigned char> payload(1500);
    for (auto& b : payload) b = static_cast<unsigned char>(rng());
    int written = 0;
    while (writer.Write(fmt::ChunkKind::kRecords, 1, payload.data(), payload.size(), false)) ++written;
    // Once failed, every later write is refused.
    const bool refused = !writer.Write(fmt::ChunkKind::kMeta, 0, "x=1\n", 4, false);
    _exit(writer.disk_full() && refused && written > 0 ? 0 : 6);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::vector<unsigned char> file = ReadFile(path);
  std::remove(path.c_str());
  EXPECT_LE(file.size(), kLimit);
  const std::vector<Chunk> chunks = WalkChunks(file);
  ASSERT_FALSE(chunks.empty());
  // Every byte belongs to a whole chunk: the partial one was cut away.
  size_t total = sizeof(fmt::FileHeader);
  for (const Chunk& c : chunks) {
    const size_t stored = c.payload.size();  // all written raw here
    total += sizeof(fmt::ChunkHeader) + stored;
  }
  EXPECT_EQ(total, file.size());
  // The last chunk says why the file ends, when it fitted.
  const Chunk& last = chunks.back();
  if (last.kind == static_cast<uint32_t>(fmt::ChunkKind::kMeta)) {
    EXPECT_EQ(std::string(last.payload.begin(), last.payload.end()), "end.reason=disk_full\n");
  }
}

}  // namespace
}  // namespace emo::runtime
