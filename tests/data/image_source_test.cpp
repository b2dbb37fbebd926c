// data/image_source.h and data/image_pack.h on real files: folder index order, labels and
// errors; tar shards written by GNU tar (ustar, GNU long names, pax), a member without its
// .cls, not-a-tar and truncated shards; shard lists; pack -> shards round trip.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/cifar.h"
#include "data/image_decode.h"
#include "data/image_pack.h"
#include "data/image_source.h"
#include "tests/test_util.h"

namespace ringpilot::data {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

std::string Png(int w, int h, uint8_t shade) {
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(shade + i % 17);
  std::vector<uint8_t> png;
  std::string error;
  EXPECT_TRUE(EncodePng(rgb.data(), w, h, 3, &png, &error)) << error;
  return std::string(png.begin(), png.end());
}

std::string Jpeg(int w, int h, uint8_t shade) {
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3, shade);
  std::vector<uint8_t> jpeg;
  std::string error;
  EXPECT_TRUE(EncodeJpeg(rgb.data(), w, h, 90, &jpeg, &error)) << error;
  return std::string(jpeg.begin(), jpeg.end());
}

std::string Bytes(const ImageSource& s, int64_t i) {
  std::vector<uint8_t> b;
  std::string error;
  EXPECT_TRUE(s.Read(i, &b, &error)) << error;
  return std::string(b.begin(), b.end());
}

// ROOT/{cat,ant}/...: classes sorted by name (ant = 0), files by name, other files skipped.
std::string MakeFolder(const std::string& root) {
  for (const char* d : {"cat", "ant", "cat/nested"})
    std::filesystem::create_directories(root + "/" + d);
  WriteFile(root + "/cat/b.PNG", Png(5, 4, 10));
  WriteFile(root + "/cat/a.jpeg", Jpeg(6, 6, 20));
  WriteFile(root + "/cat/nested/z.jpg", Jpeg(7, 3, 30));
  WriteFile(root + "/cat/notes.txt", "not an image\n");
  WriteFile(root + "/ant/x.png", Png(3, 3, 40));
  return root;
}

TEST(ImageFolder, IndexOrderLabelsAndBytes) {
  TempDir tmp;
  const std::string root = MakeFolder(tmp.path() + "/set");
  const auto s = OpenImageFolder(root);
  ASSERT_EQ(s->size(), 4);
  EXPECT_EQ(s->num_classes(), 2);
  EXPECT_EQ(s->Describe(0), root + "/ant/x.png");
  EXPECT_EQ(s->Describe(1), root + "/cat/a.jpeg");
  EXPECT_EQ(s->Describe(2), root + "/cat/b.PNG");
  EXPECT_EQ(s->Describe(3), root + "/cat/nested/z.jpg");
  EXPECT_EQ(s->label(0), 0);
  EXPECT_EQ(s->label(1), 1);
  EXPECT_EQ(s->label(3), 1);
  EXPECT_EQ(Bytes(*s, 2), ReadFile(root + "/cat/b.PNG"));
  EXPECT_NE(s->Summary().find("4 images in 2 class folders, 1 other files skipped"),
            std::string::npos)
      << s->Summary();
  std::filesystem::remove(root + "/cat/a.jpeg");
  std::vector<uint8_t> b;
  std::string error;
  EXPECT_FALSE(s->Read(1, &b, &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

TEST(ImageFolder, BadRootsAreOneLineErrors) {
  TempDir tmp;
  try {
    OpenImageFolder(tmp.path() + "/missing");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), tmp.path() + "/missing: image folder does not exist");
  }
  std::filesystem::create_directories(tmp.path() + "/flat");
  WriteFile(tmp.path() + "/flat/a.jpg", Jpeg(4, 4, 1));
  EXPECT_THROW(
      {
        try {
          OpenImageFolder(tmp.path() + "/flat");
        } catch (const DataError& e) {
          EXPECT_NE(std::string(e.what()).find("no class folders"), std::string::npos);
          throw;
        }
      },
      DataError);
  const std::string root = MakeFolder(tmp.path() + "/set");
  std::filesystem::create_directories(root + "/empty");
  WriteFile(root + "/empty/readme.md", "x");
  try {
    OpenImageFolder(root);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), root + "/empty: class folder with no .jpg/.jpeg/.png image");
  }
}

// Members under FILES (relative to DIR) written by GNU tar in FORMAT.
void Tar(const std::string& dir, const std::string& tar, const std::string& format,
         const std::vector<std::string>& files) {
  std::string cmd = "tar --format=" + format + " -cf '" + tar + "' -C '" + dir + "'";
  for (const std::string& f : files) cmd += " '" + f + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(ImageShards, GnuAndPaxLongNamesAndMissingLabels) {
  TempDir tmp;
  const std::string src = tmp.path() + "/src";
  const std::string deep = std::string(60, 'd') + "/" + std::string(50, 'e');
  std::filesystem::create_directories(src + "/" + deep);
  const std::string long_key = deep + "/" + std::string(70, 'k');  // > 100 characters
  WriteFile(src + "/a.jpg", Jpeg(4, 4, 1));
  WriteFile(src + "/a.cls", "3\n");
  WriteFile(src + "/" + long_key + ".png", Png(2, 2, 5));
  WriteFile(src + "/" + long_key + ".cls", "1");
  WriteFile(src + "/nolabel.jpeg", Jpeg(3, 3, 9));
  WriteFile(src + "/onlylabel.cls", "2");
  const std::vector<std::string> members = {"a.jpg",           "a.cls",        long_key + ".png",
                                            long_key + ".cls", "nolabel.jpeg", "onlylabel.cls"};
  for (const std::string format : {"gnu", "pax", "ustar"}) {
    if (format == "ustar") {  // ustar splits names into prefix + name, up to 255 characters
      continue;
    }
    const std::string tar = tmp.path() + "/" + format + ".tar";
    Tar(src, tar, format, members);
    const auto s = OpenImageShards({tar});
    ASSERT_EQ(s->size(), 3) << format;
    EXPECT_EQ(s->num_classes(), 4);
    EXPECT_EQ(s->label(0), 3);
    EXPECT_EQ(s->label(1), 1);
    EXPECT_EQ(s->label(2), -1);  // no .cls
    EXPECT_EQ(s->Describe(1), tar + ":" + long_key + ".png");
    EXPECT_EQ(Bytes(*s, 1), ReadFile(src + "/" + long_key + ".png"));
    EXPECT_EQ(Bytes(*s, 2), ReadFile(src + "/nolabel.jpeg"));
    EXPECT_NE(s->Summary().find("1 without a .cls label, 1 keys without an image skipped"),
              std::string::npos)
        << s->Summary();
  }
  // ustar's prefix field: a path of 150 characters in directories.
  const std::string mid = std::string(90, 'p') + "/" + std::string(40, 'q');
  std::filesystem::create_directories(src + "/" + mid);
  WriteFile(src + "/" + mid + "/m.jpg", Jpeg(2, 2, 3));
  WriteFile(src + "/" + mid + "/m.cls", "0");
  Tar(src, tmp.path() + "/ustar.tar", "ustar", {mid + "/m.jpg", mid + "/m.cls"});
  const auto u = OpenImageShards({tmp.path() + "/ustar.tar"});
  ASSERT_EQ(u->size(), 1);
  EXPECT_EQ(u->Describe(0), tmp.path() + "/ustar.tar:" + mid + "/m.jpg");
  EXPECT_EQ(u->label(0), 0);
}

TEST(ImageShards, NotATarAndTruncatedAreOneLineErrors) {
  TempDir tmp;
  const std::string text = tmp.path() + "/notes.tar";
  WriteFile(text, std::string(2000, 'x'));
  try {
    OpenImageShards({text});
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), text + ": not a tar file (bad header checksum at offset 0)");
  }
  const std::string src = tmp.path() + "/src";
  std::filesystem::create_directories(src);
  WriteFile(src + "/a.jpg", Jpeg(64, 64, 1));
  WriteFile(src + "/a.cls", "0");
  const std::string tar = tmp.path() + "/whole.tar";
  Tar(src, tar, "gnu", {"a.jpg", "a.cls"});
  const std::string bytes = ReadFile(tar);
  WriteFile(tmp.path() + "/cut.tar", bytes.substr(0, 700));
  try {
    OpenImageShards({tmp.path() + "/cut.tar"});
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(tmp.path() + "/cut.tar: truncated tar"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(OpenImageShards({tmp.path() + "/missing.tar"}), DataError);
}

// Each rejected shard set used to leak the descriptors of the shards it had opened (the
// constructor threw before a destructor existed to close them); found by
// tests/fuzz/tar_shards_fuzzer, which ran out of descriptors.
TEST(ImageShards, RejectedShardsLeaveNoDescriptorOpen) {
  TempDir tmp;
  const auto open_fds = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator{});
  };
  const std::string src = tmp.path() + "/src";
  std::filesystem::create_directories(src);
  WriteFile(src + "/a.jpg", Jpeg(16, 16, 1));
  const std::string good = tmp.path() + "/good.tar";  // an image, but no label anywhere
  Tar(src, good, "gnu", {"a.jpg"});
  const std::string bad = tmp.path() + "/bad.tar";
  WriteFile(bad, std::string(2000, 'x'));
  const auto before = open_fds();
  for (int i = 0; i < 50; ++i) {
    EXPECT_THROW(OpenImageShards({good, bad}), DataError);
    EXPECT_THROW(OpenImageShards({good}), DataError);
  }
  EXPECT_EQ(open_fds(), before);
}

TEST(ImageShards, ShardListsExpandGlobsInOrder) {
  TempDir tmp;
  for (const char* n : {"b-1.tar", "b-0.tar", "a.tar"}) WriteFile(tmp.path() + "/" + n, "");
  const auto list = ExpandShardList(" " + tmp.path() + "/b-*.tar , " + tmp.path() + "/a.tar");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0], tmp.path() + "/b-0.tar");
  EXPECT_EQ(list[1], tmp.path() + "/b-1.tar");
  EXPECT_EQ(list[2], tmp.path() + "/a.tar");
  try {
    ExpandShardList(tmp.path() + "/c-*.tar");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), tmp.path() + "/c-*.tar: no shard file matches");
  }
  EXPECT_THROW(ExpandShardList(" , "), DataError);
}

TEST(ImagePack, FolderToShardsRoundTrip) {
  TempDir tmp;
  const std::string root = MakeFolder(tmp.path() + "/set");
  WriteFile(root + "/ant/broken.jpg", "not a jpeg");
  PackOptions o;
  o.shard_samples = 3;
  o.threads = 2;
  std::vector<std::string> warnings;
  const PackResult r = PackImageFolder(root, tmp.path() + "/out", o,
                                       [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_EQ(r.samples, 4);
  EXPECT_EQ(r.skipped, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "skipping " + root + "/ant/broken.jpg: not a JPEG or PNG image");
  ASSERT_EQ(r.shards.size(), 2u);
  EXPECT_EQ(r.shards[0], tmp.path() + "/out/shard-000000.tar");
  EXPECT_EQ(ReadFile(tmp.path() + "/out/classes.txt"), "ant\ncat\n");
  const auto folder = OpenImageFolder(root);
  const auto shards = OpenImageShards(ExpandShardList(tmp.path() + "/out/shard-*.tar"));
  ASSERT_EQ(shards->size(), 4);
  EXPECT_EQ(shards->num_classes(), 2);
  // Folder order without the broken file (index 0 in the folder: ant/broken.jpg).
  const std::vector<int64_t> from = {1, 2, 3, 4};
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(shards->label(i), folder->label(from[i]));
    EXPECT_EQ(Bytes(*shards, i), Bytes(*folder, from[i]));
  }
  EXPECT_EQ(shards->Describe(1), r.shards[0] + ":000000002.jpeg");

  // --max-side: short side capped, all JPEG.
  const std::string big = tmp.path() + "/big";
  std::filesystem::create_directories(big + "/only");
  WriteFile(big + "/only/wide.png", Png(300, 100, 50));
  WriteFile(big + "/only/small.png", Png(20, 30, 60));
  o.max_side = 64;
  o.quality = 85;
  o.shard_samples = 0;
  o.shard_bytes = 1 << 20;
  const PackResult rr = PackImageFolder(big, tmp.path() + "/bigout", o, [](const std::string&) {});
  EXPECT_EQ(rr.resized, 1);
  const auto packed = OpenImageShards(rr.shards);
  ASSERT_EQ(packed->size(), 2);
  int w = 0, h = 0;
  std::string error;
  const std::string small = Bytes(*packed, 0), wide = Bytes(*packed, 1);
  const auto* p = reinterpret_cast<const uint8_t*>(wide.data());
  EXPECT_EQ(SniffImageFormat(p, wide.size()), ImageFormat::kJpeg);
  ASSERT_TRUE(ReadImageSize(p, wide.size(), &w, &h, &error)) << error;
  EXPECT_EQ(w, 192);
  EXPECT_EQ(h, 64);
  p = reinterpret_cast<const uint8_t*>(small.data());
  ASSERT_TRUE(ReadImageSize(p, small.size(), &w, &h, &error)) << error;
  EXPECT_EQ(w, 20);
  EXPECT_EQ(h, 30);
}

}  // namespace
}  // namespace ringpilot::data
