// The crop-only JPEG decode behind DecodeImageCrop (data/image_decode.h), through
// libjpeg-turbo's libjpeg API. Internal to ringpilot::data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image_decode.h"
#include "data/image_transform.h"

namespace ringpilot::data {

/// DecodeImageCrop for a JPEG (`data` starts with FF D8 FF). Same contract.
bool DecodeJpegCrop(const uint8_t* data, size_t size, const CropBox& box, int out_width,
                    int out_height, DecodedImage* out, CropBox* region_box, std::string* error);

}  // namespace ringpilot::data
