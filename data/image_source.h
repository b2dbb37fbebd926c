// Labelled sets of encoded images (JPEG or PNG bytes) that the image pipelines decode:
// an image folder (data.kind image_folder) or WebDataset-style tar shards (image_shards).
// A source only indexes and reads bytes; decoding and augmentation happen in the
// pipelines (data/image_decode.h on CPU ranks, nvJPEG on GPU ranks).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ringpilot::data {

/// Where ImageSource::ReadInto puts a sample's bytes, so a reader can land them straight in
/// the memory that uses them (the GPU pipeline: pinned host memory).
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  /// Room for exactly `size` bytes, which the source then fills; nullptr when there is none
  /// (the read fails with that reason).
  virtual uint8_t* Room(size_t size) = 0;
};

/// Thread-safe for concurrent Read/Describe/label calls once constructed (the index is
/// immutable; reads use positional I/O).
class ImageSource {
 public:
  virtual ~ImageSource() = default;

  /// Samples in the set (its index order is fixed: the sampler's indices refer to it).
  virtual int64_t size() const = 0;
  /// Classes (image_folder: class folders; image_shards: 1 + the largest label seen).
  virtual int num_classes() const = 0;
  /// Class index of sample `index`, in [0, num_classes), or -1 when the sample has no
  /// usable label (a shard member without its .cls): the pipelines treat it as bad.
  virtual int32_t label(int64_t index) const = 0;
  /// Where sample `index` lives, for warnings and the distinct bad-file count: a path, or
  /// "SHARD.tar:KEY.jpg".
  virtual std::string Describe(int64_t index) const = 0;
  /// Writes sample `index`'s encoded image into `sink` (one Room call, then the bytes).
  /// Returns false and sets `*error` (one line, no path: the caller adds Describe()) when it
  /// cannot be read.
  virtual bool ReadInto(int64_t index, ByteSink& sink, std::string* error) const = 0;
  /// ReadInto `*bytes`, replacing its contents (its buffer is reused).
  bool Read(int64_t index, std::vector<uint8_t>* bytes, std::string* error) const;
  /// One line for the rank log: where the set is, samples, classes, and what was skipped
  /// while indexing (files with other extensions; shard keys without an image).
  virtual std::string Summary() const = 0;
};

/// data.kind image_folder: ROOT/<class>/<file> with extensions .jpg, .jpeg, .png (any
/// case); class index = position of the folder name in byte-wise sorted order; files in a
/// class sorted by name. Files with other extensions are skipped (counted in the log line
/// the caller prints). Throws DataError (data/cifar.h) for a missing or unreadable root, a
/// root with no class folders, and a class folder with no images, naming the path.
std::unique_ptr<ImageSource> OpenImageFolder(const std::string& root);

/// data.kind image_shards: tar files in the WebDataset convention. Members are grouped by
/// key (the member path up to the first '.' of its last component); a key's image is its
/// .jpg/.jpeg/.png member (any case), its label the decimal text of its .cls member. Samples
/// are the keys with an image, in shard order, then member order; a key with an image and
/// no (or an unreadable) .cls has label -1. Headers (ustar, GNU long names, pax path and
/// size records) are indexed once here; images are read later with pread. Throws DataError
/// naming the file for a missing or unreadable shard, one that is not a tar (bad header
/// checksum) or is truncated, and for shards holding no image.
std::unique_ptr<ImageSource> OpenImageShards(const std::vector<std::string>& shards);

/// The shard list of a data.train / data.val value: comma-separated paths, each a file or a
/// glob(3) pattern (its matches sorted), in the order given. Throws DataError for an empty
/// list or a pattern that matches nothing.
std::vector<std::string> ExpandShardList(const std::string& spec);

}  // namespace ringpilot::data
