// trainer/checkpoint/safetensors.h: the layout of the format (8-byte little-endian header
// length, JSON header padded to 8 bytes, packed little-endian data in header order), read
// back here independently of the writer.
#include <cstring>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "trainer/checkpoint/safetensors.h"

namespace ringpilot::trainer::checkpoint {
namespace {

struct Parsed {
  nlohmann::json header;
  std::string data;
};

Parsed Parse(const std::string& file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  EXPECT_LE(8 + n, file.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "data not 8-byte aligned";
  return {nlohmann::json::parse(file.substr(8, n)), file.substr(8 + n)};
}

TEST(Safetensors, HeaderDescribesPackedLittleEndianData) {
  // A channels_last weight is written in its logical (NCHW) order.
  const at::Tensor conv = torch::arange(24, torch::kFloat)
                              .reshape({2, 3, 2, 2})
                              .contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor count = torch::tensor(int64_t{7});
  const at::Tensor half = torch::tensor({1.5, -2.0}).to(torch::kBFloat16);
  const std::string file = EncodeSafetensors(
      {{"conv.weight", conv}, {"bn.num_batches_tracked", count}, {"h", half}}, {{"format", "pt"}});
  const Parsed p = Parse(file);
  EXPECT_EQ(p.header["__metadata__"]["format"], "pt");
  const auto& c = p.header["conv.weight"];
  EXPECT_EQ(c["dtype"], "F32");
  EXPECT_EQ(c["shape"], nlohmann::json({2, 3, 2, 2}));
  EXPECT_EQ(c["data_offsets"], nlohmann::json({0, 96}));
  EXPECT_EQ(p.header["bn.num_batches_tracked"]["dtype"], "I64");
  EXPECT_EQ(p.header["bn.num_batches_tracked"]["shape"], nlohmann::json::array());
  EXPECT_EQ(p.header["bn.num_batches_tracked"]["data_offsets"], nlohmann::json({96, 104}));
  EXPECT_EQ(p.header["h"]["dtype"], "BF16");
  EXPECT_EQ(p.header["h"]["data_offsets"], nlohmann::json({104, 108}));
  ASSERT_EQ(p.data.size(), 108u);
  float first[24];
  std::memcpy(first, p.data.data(), sizeof(first));
  for (int i = 0; i < 24; ++i) EXPECT_EQ(first[i], static_cast<float>(i)) << i;
  int64_t seven = 0;
  std::memcpy(&seven, p.data.data() + 96, 8);
  EXPECT_EQ(seven, 7);
  const at::Tensor back =
      torch::from_blob(const_cast<char*>(p.data.data()) + 104, {2}, torch::kBFloat16);
  EXPECT_TRUE(at::equal(back, half));
}

TEST(Safetensors, RejectsRepeatedNamesAndUnnamedDtypes) {
  const at::Tensor t = torch::zeros({2});
  EXPECT_THROW(EncodeSafetensors({{"a", t}, {"a", t}}, {}), CheckpointError);
  EXPECT_THROW(EncodeSafetensors({{"", t}}, {}), CheckpointError);
  EXPECT_THROW(EncodeSafetensors({{"__metadata__", t}}, {}), CheckpointError);
  EXPECT_THROW(EncodeSafetensors({{"c", torch::zeros({2}, torch::kComplexFloat)}}, {}),
               CheckpointError);
}

}  // namespace
}  // namespace ringpilot::trainer::checkpoint
