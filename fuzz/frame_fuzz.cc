// Fuzzes the daemon's EventBatch decoder (protocol/frame_decoder.h) on arbitrary bytes, with the
// generated parser as the oracle (protocol/testing/decoder_oracle.h).
//
// Properties checked, each an abort() that libFuzzer reports as a crash:
//  - it never crashes, and ASan/UBSan find nothing (the fuzz build instruments all our code);
//  - DecodeEventBatch accepts exactly what v1::EventBatch::ParseFromArray accepts, and then
//    decodes the same values (every field the daemon reads, the tensors of every forward event);
//  - checking (no visitor) and decoding agree; SkimEventBatch never refuses what ParseFromArray
//    accepts, and summarises as the full decode does.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "protocol/testing/decoder_oracle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string disagreement = tracetorch::protocol::testing::DecoderDisagreement(input);
  if (!disagreement.empty()) {
    std::fprintf(stderr, "frame_fuzz: the decoder and the generated parser disagree: %s\n",
                 disagreement.c_str());
    std::abort();
  }
  return 0;
}
