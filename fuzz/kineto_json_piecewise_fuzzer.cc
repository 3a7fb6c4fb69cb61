// libFuzzer target: the Kineto JSON reader's piecewise path (ReadKinetoJsonPiecewise, which `emo`
// takes for files of 8 MiB and more), against the whole-document reader. The first input byte
// picks the batch size (1 to 2048 bytes of events), the second the size of the pieces the file is
// read and decompressed in (1 to 4096 bytes: cuts anywhere in a token, a string, a gzip member),
// the rest is the file. Whatever the piecewise path reads, the whole reader must read too, to the
// same Trace (src/trace/kineto_json_stream.h promises it): a difference aborts, and libFuzzer
// keeps the input.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "emo/trace/reader.h"
#include "trace_target.h"
#include "trace/kineto_json_stream.h"
#include "trace/trace_fingerprint.h"

namespace {

// The input as a file without touching the disk: one memory file per process, rewritten per run.
const std::string& InputPath(std::string_view bytes) {
  static const int fd = memfd_create("emo-fuzz-kineto", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0 ||
      pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    std::perror("kineto_json_piecewise fuzzer: memory file");
    std::abort();
  }
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return -1;
  const size_t batch = size_t{1} << (data[0] % 12);
  const size_t read = size_t{1} << (data[1] % 13);
  const std::string_view file(reinterpret_cast<const char*>(data + 2), size - 2);
  const std::string& path = InputPath(file);
  std::optional<std::string> text = emo::fuzz::Input(data + 2, size - 2, path);
  if (!text || !emo::fuzz::SniffedBy("kineto-json", *text)) return -1;
  std::optional<emo::trace::Trace> piecewise = emo::trace::ReadKinetoJsonPiecewise(path, batch, read);
  if (!piecewise) return 0;  // declined: `emo` reads such a file whole
  emo::Result<emo::trace::Trace> whole = emo::trace::ReadTraceData(path, std::move(*text));
  if (!whole.ok()) {
    std::fprintf(stderr, "the piecewise reader read what the whole reader refuses: %s\n",
                 std::string(whole.status().message()).c_str());
    std::abort();
  }
  if (emo::trace::Fingerprint(*piecewise) != emo::trace::Fingerprint(*whole)) {
    std::fprintf(stderr, "the piecewise reader (batch %zu, pieces of %zu) and the whole reader differ\n", batch, read);
    std::abort();
  }
  return 0;
}
