#include "data/image_source.h"

namespace ringpilot::data {
namespace {

class VectorSink : public ByteSink {
 public:
  explicit VectorSink(std::vector<uint8_t>* bytes) : bytes_(bytes) {}
  uint8_t* Room(size_t size) override {
    bytes_->resize(size);
    return bytes_->data();
  }

 private:
  std::vector<uint8_t>* bytes_;
};

}  // namespace

bool ImageSource::Read(int64_t index, std::vector<uint8_t>* bytes, std::string* error) const {
  VectorSink sink(bytes);
  return ReadInto(index, sink, error);
}

}  // namespace ringpilot::data
