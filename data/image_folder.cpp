// data.kind image_folder: the ImageNet / torchvision ImageFolder layout.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/files.h"
#include "data/cifar.h"
#include "data/image_source.h"

namespace ringpilot::data {
namespace {

bool IsImageName(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

// Reads all of `path` into `sink`.
bool ReadWholeFile(const std::string& path, ByteSink& sink, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    *error = std::string("cannot stat: ") + std::strerror(errno);
    ::close(fd);
    return false;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  uint8_t* bytes = sink.Room(size);
  if (bytes == nullptr) {
    *error = "no memory for " + std::to_string(size) + " bytes";
    ::close(fd);
    return false;
  }
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, bytes + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = n == 0 ? std::string("file shrank while reading")
                      : std::string("cannot read: ") + std::strerror(errno);
      ::close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return true;
}

class ImageFolder : public ImageSource {
 public:
  explicit ImageFolder(const std::string& root) : root_(root) {
    if (!base::Exists(root)) throw DataError(root + ": image folder does not exist");
    if (!base::IsDirectory(root)) throw DataError(root + ": not a folder (data.kind image_folder)");
    std::vector<std::string> classes;
    for (const std::string& name : base::ListDir(root)) {
      if (base::IsDirectory(root + "/" + name)) classes.push_back(name);
    }
    if (classes.empty()) {
      throw DataError(root + ": no class folders (want ROOT/<class>/<image>.jpg)");
    }
    num_classes_ = static_cast<int>(classes.size());
    offsets_.push_back(0);
    for (int c = 0; c < num_classes_; ++c) {
      const size_t before = labels_.size();
      Walk(classes[c], c);
      if (labels_.size() == before) {
        throw DataError(root + "/" + classes[c] + ": class folder with no .jpg/.jpeg/.png image");
      }
    }
  }

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  int num_classes() const override { return num_classes_; }
  int32_t label(int64_t index) const override { return labels_[index]; }
  std::string Describe(int64_t index) const override {
    return root_ + "/" +
           std::string(names_.data() + offsets_[index], offsets_[index + 1] - offsets_[index]);
  }
  bool ReadInto(int64_t index, ByteSink& sink, std::string* error) const override {
    return ReadWholeFile(Describe(index), sink, error);
  }
  std::string Summary() const override {
    std::string line = root_ + ": " + std::to_string(size()) + " images in " +
                       std::to_string(num_classes_) + " class folders";
    if (other_files_ > 0) {
      line += ", " + std::to_string(other_files_) + " other files skipped";
    }
    return line;
  }

 private:
  // Pre-order, names sorted (as torchvision's sorted os.walk): a folder's images, then its
  // subfolders'. Paths are kept relative to the root in one buffer (ImageNet: 1.28 M).
  void Walk(const std::string& rel, int label) {
    std::vector<std::string> folders;
    for (const std::string& name : base::ListDir(root_ + "/" + rel)) {
      const std::string path = rel + "/" + name;
      if (base::IsDirectory(root_ + "/" + path)) {
        folders.push_back(path);
      } else if (IsImageName(name)) {
        names_.insert(names_.end(), path.begin(), path.end());
        offsets_.push_back(names_.size());
        labels_.push_back(label);
      } else {
        ++other_files_;
      }
    }
    for (const std::string& f : folders) Walk(f, label);
  }

  const std::string root_;
  int num_classes_ = 0;
  int64_t other_files_ = 0;
  std::vector<char> names_;
  std::vector<size_t> offsets_;  // sample i's path is names_[offsets_[i], offsets_[i + 1])
  std::vector<int32_t> labels_;
};

}  // namespace

std::unique_ptr<ImageSource> OpenImageFolder(const std::string& root) {
  try {
    return std::make_unique<ImageFolder>(root);
  } catch (const base::FileError& e) {  // an unreadable folder
    throw DataError(e.what());
  }
}

}  // namespace ringpilot::data
