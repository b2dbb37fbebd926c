#include "data/image_loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/thread_priority.h"
#include "data/image_decode.h"
#include "data/image_transform.h"

namespace ringpilot::data {

ImageBatchLoader::ImageBatchLoader(const ImageSource& source, StepPlan& plan,
                                   std::vector<BatchSlot> slots, const ImageLoaderOptions& options)
    : source_(source),
      plan_(plan),
      buffers_(std::move(slots)),
      options_(options),
      image_bytes_(static_cast<size_t>(3) * options.out_height * options.out_width),
      slots_(buffers_.size()),
      bad_(source, options.max_bad_fraction) {
  for (Slot& s : slots_) s.indices.reserve(static_cast<size_t>(options.batch));
}

ImageBatchLoader::~ImageBatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ImageBatchLoader::Start(int64_t first_step, int64_t end_step) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_step_ = first_step;
    low_ = first_step;
    waited_ = first_step - 1;
    end_step_ = end_step;
  }
  for (int i = 0; i < std::max(1, options_.workers); ++i) threads_.emplace_back([this] { Work(); });
}

int ImageBatchLoader::Wait(int64_t step, int* count, std::string* fatal) {
  const int index = static_cast<int>(step % static_cast<int64_t>(slots_.size()));
  std::unique_lock<std::mutex> lock(mu_);
  ready_cv_.wait(lock, [&] {
    const Slot& s = slots_[index];
    return !fatal_.empty() || (s.step == step && s.done == s.count);
  });
  if (!fatal_.empty()) {
    *fatal = fatal_;
    return -1;
  }
  waited_ = step;
  *count = slots_[index].count;
  return index;
}

void ImageBatchLoader::Release(int64_t step) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (step + 1 <= low_) return;
    low_ = step + 1;
  }
  work_cv_.notify_all();
}

std::vector<std::string> ImageBatchLoader::TakeWarnings() { return bad_.TakeWarnings(); }

LoaderCounts ImageBatchLoader::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  LoaderCounts c = counts_;
  c.ready_batches = 0;
  for (const Slot& s : slots_) {
    if (s.step > waited_ && s.count > 0 && s.done == s.count) ++c.ready_batches;
  }
  return c;
}

std::vector<int64_t> ImageBatchLoader::bad_files() const { return bad_.files(); }

void ImageBatchLoader::Work() {
  base::SetThisThreadNice(options_.worker_nice);
  CropScratch scratch;
  std::vector<BadSample> bad;  // this sample's failed tries
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] {
      return stop_ ||
             (next_step_ < end_step_ && next_step_ < low_ + static_cast<int64_t>(slots_.size()));
    });
    if (stop_) return;
    const int64_t step = next_step_;
    Slot& slot = slots_[step % static_cast<int64_t>(slots_.size())];
    if (next_item_ == 0) {
      slot.epoch = plan_.Indices(step, &slot.indices);
      slot.step = step;
      slot.count = static_cast<int>(std::min<size_t>(slot.indices.size(), options_.batch));
      slot.done = 0;
    }
    const int item = next_item_++;
    if (next_item_ >= slot.count) {
      ++next_step_;
      next_item_ = 0;
    }
    const int64_t wanted = slot.indices[item];
    const int64_t epoch = slot.epoch;
    const BatchSlot& out = buffers_[step % static_cast<int64_t>(buffers_.size())];
    lock.unlock();

    uint8_t* pixels = out.pixels + image_bytes_ * static_cast<size_t>(item);
    bad.clear();
    int32_t label = 0;
    int64_t decoded = 0;
    const int64_t index =
        LoadOrSubstitute(wanted, source_.size(), &bad, [&](int64_t i, std::string* why) {
          ++decoded;
          label = LoadCroppedSample(source_, i, epoch, options_, scratch, pixels, why);
          return label >= 0;
        });
    if (index < 0) {  // a run of bad samples: a black image keeps the batch full
      std::memset(pixels, 0, image_bytes_);
      label = 0;
    }
    out.labels[item] = label;

    lock.lock();
    counts_.samples += 1;
    counts_.decoded += decoded;
    if (!bad.empty()) counts_.bad_samples += 1;
    // The shared log (data/bad_samples.h) warns once per file and keeps the limit.
    if (!bad_.Record(1, bad.empty() ? 0 : 1, bad) && fatal_.empty()) {
      fatal_ = bad_.fatal();
      stop_ = true;
      work_cv_.notify_all();
      ready_cv_.notify_all();
      return;
    }
    // The slot may have been reassigned only after this step was released, which needs
    // this entry done first: `slot` is still this step's.
    if (++slot.done == slot.count) ready_cv_.notify_all();
  }
}

int32_t LoadCroppedSample(const ImageSource& source, int64_t index, int64_t epoch,
                          const ImageLoaderOptions& options, CropScratch& scratch, uint8_t* pixels,
                          std::string* error) {
  const int32_t label = UsableLabel(source, index, error);
  if (label < 0) return -1;
  if (!source.Read(index, &scratch.bytes, error)) return -1;
  int width = 0, height = 0;
  if (!ReadImageSize(scratch.bytes.data(), scratch.bytes.size(), &width, &height, error)) {
    return -1;
  }
  const CropBox box = options.transform == ImageTransform::kTrain
                          ? TrainCropBox(width, height, options.seed, epoch, index)
                          : EvalCropBox(width, height);
  // Only the rows and columns the crop covers are decoded, at the coarsest DCT scale that
  // keeps its resolution: RandomResizedCrop keeps 8-100% of the area.
  CropBox region_box;
  if (!DecodeImageCrop(scratch.bytes.data(), scratch.bytes.size(), box, options.out_width,
                       options.out_height, &scratch.image, &region_box, error)) {
    return -1;
  }
  const DecodedImage& img = scratch.image;
  ResampleCrop(img.rgb.data(), img.width, img.height, region_box, options.out_height,
               options.out_width, pixels);
  return label;
}

}  // namespace ringpilot::data
