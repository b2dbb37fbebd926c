// The crops of image training and evaluation, as boxes in source pixels, drawn from (seed,
// epoch, sample) so that every run and every rank count sees the same pixels; and their
// bilinear resampling on the CPU. The GPU pipeline takes the same boxes and resamples with
// the same arithmetic (pixel centres, bilinear, edge clamp), so CPU and GPU ranks train on
// the same crops up to rounding.
#pragma once

#include <cstdint>

namespace ringpilot::data {

/// A region of a decoded image, in source pixels (x, y of its top-left corner), and whether
/// the output is mirrored left-right.
struct CropBox {
  float x = 0;
  float y = 0;
  float width = 0;
  float height = 0;
  bool flip = false;
};

/// torchvision's RandomResizedCrop(scale=(0.08, 1), ratio=(3/4, 4/3)) followed by
/// RandomHorizontalFlip(0.5): up to 10 tries of a random area and log-uniform aspect ratio,
/// then the centre crop of the clamped ratio. Integer box, as torchvision's.
CropBox TrainCropBox(int width, int height, uint64_t seed, int64_t epoch, int64_t sample);

/// Resize(short side to out_side / 0.875) + CenterCrop(out_side), as the ImageNet
/// evaluation transform: the centred square of side 0.875 x the short side (no flip).
CropBox EvalCropBox(int width, int height);

/// Resamples `box` of the `width` x `height` RGB image `rgb` (interleaved, row-major) to
/// `out_height` x `out_width` planar RGB (CHW, uint8) at `out`: bilinear at pixel centres,
/// clamped at the edges, mirrored when box.flip.
void ResampleCrop(const uint8_t* rgb, int width, int height, const CropBox& box, int out_height,
                  int out_width, uint8_t* out);

}  // namespace ringpilot::data
