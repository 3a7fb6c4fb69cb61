// libFuzzer target: the reader of EMO's own trace format (.emotrace), gzip included.
#include <cstring>

#include <libdeflate.h>

#include "emo/trace/emo_format.h"
#include "trace_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return emo::fuzz::FuzzTraceReader("emo", data, size);
}

#ifdef EMO_FUZZ_LIBFUZZER
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

// Every chunk carries a crc32 of its payload, so almost any mutation of a payload stops the
// reader at its first check. After mutating, this rewrites the checksums of the chunks that
// follow one another from the header on (three times in four; the fourth keeps what the
// mutation left, for the reader's checks of damaged chunks), so records and strings are fuzzed.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  namespace f = emo::trace::emo_format;
  size = LLVMFuzzerMutate(data, size, max_size);
  if (seed % 4 == 0 || size < sizeof(f::FileHeader)) return size;
  f::FileHeader header;
  std::memcpy(&header, data, sizeof(header));
  size_t at = header.header_bytes;
  while (at >= sizeof(header) && at + sizeof(f::ChunkHeader) <= size) {
    f::ChunkHeader chunk;
    std::memcpy(&chunk, data + at, sizeof(chunk));
    const size_t payload = at + sizeof(chunk);
    if (chunk.stored_bytes > size - payload) break;
    chunk.crc32 = libdeflate_crc32(0, data + payload, chunk.stored_bytes);
    std::memcpy(data + at, &chunk, sizeof(chunk));
    at = payload + chunk.stored_bytes;
  }
  return size;
}
#endif
