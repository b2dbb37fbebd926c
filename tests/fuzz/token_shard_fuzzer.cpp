// libFuzzer target: token shards (data/token_shards.h), the P.tokens / P.index pair every
// rank memory-maps for data.kind tokens. Input: a 4-byte little-endian length L, then L
// bytes of P.tokens (fewer when the input is shorter), then P.index. Contract checked:
// ReadTokenShardInfo and TokenShard accept a shard or throw DataError; an accepted shard's
// ids are inside its vocabulary, its documents ascend from 0 to the token count, and BERT
// packing (PackedSequences) reads only ids of the shard.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data/token_shards.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringpilot::data;
  if (size < 4) return 0;
  uint32_t token_len = 0;
  std::memcpy(&token_len, data, 4);
  data += 4;
  size -= 4;
  const size_t tokens_bytes = std::min<size_t>(token_len, size);
  const std::string prefix = ringpilot::fuzz::ScratchDir() + "/shard";
  ringpilot::fuzz::WriteFile(TokenFilePath(prefix), data, tokens_bytes);
  ringpilot::fuzz::WriteFile(IndexFilePath(prefix), data + tokens_bytes, size - tokens_bytes);
  try {
    const TokenShardInfo info = ReadTokenShardInfo(prefix);
    const TokenShard shard(prefix);
    if (shard.info().tokens != info.tokens || shard.info().documents != info.documents) {
      __builtin_trap();
    }
    for (int64_t i = 0; i < info.tokens; ++i) {
      if (shard.Token(i) < 0 || shard.Token(i) >= info.vocab.size) __builtin_trap();
    }
    if (shard.DocumentStart(0) != 0 || shard.DocumentStart(info.documents) != info.tokens) {
      __builtin_trap();
    }
    for (int64_t d = 0; d < info.documents; ++d) {
      if (shard.DocumentStart(d) >= shard.DocumentStart(d + 1)) __builtin_trap();
    }
    for (const int seq_len : {2, 5, 64}) {
      try {
        const PackedSequences packed(shard, seq_len);
        if (packed.size() != PackedSequenceCount(info, seq_len)) __builtin_trap();
        std::vector<int64_t> ids(static_cast<size_t>(seq_len));
        for (int64_t i = 0; i < std::min<int64_t>(packed.size(), 64); ++i) {
          packed.Fill(i, ids.data());
          if (ids[0] != info.vocab.cls) __builtin_trap();
          for (const int64_t id : ids) {
            if (id < 0 || id >= info.vocab.size) __builtin_trap();
          }
        }
      } catch (const DataError&) {
      }
    }
  } catch (const DataError&) {
  }
  return 0;
}
