// ToString of the job's enums (declared in config/job.h), from config/enum_names.h.
#include "config/enum_names.h"
#include "config/job.h"

namespace ringpilot::config {

const char* ToString(Device d) { return detail::NameOf(detail::kDeviceNames, static_cast<int>(d)); }
const char* ToString(Backend b) {
  return detail::NameOf(detail::kBackendNames, static_cast<int>(b));
}
const char* ToString(Precision p) {
  return detail::NameOf(detail::kPrecisionNames, static_cast<int>(p));
}
const char* ToString(Optimizer o) {
  return detail::NameOf(detail::kOptimizerNames, static_cast<int>(o));
}
const char* ToString(LrSchedule s) {
  return detail::NameOf(detail::kLrScheduleNames, static_cast<int>(s));
}
const char* ToString(GradDtype g) {
  return detail::NameOf(detail::kGradDtypeNames, static_cast<int>(g));
}
const char* ToString(NcclBufferRegistration r) {
  return detail::NameOf(detail::kBufferRegistrationNames, static_cast<int>(r));
}

const char* ToString(NcclCtaPolicy p) {
  return detail::NameOf(detail::kCtaPolicyNames, static_cast<int>(p));
}
const char* ToString(BindMode b) { return detail::NameOf(detail::kBindNames, static_cast<int>(b)); }
const char* ToString(ModelName m) {
  return detail::NameOf(detail::kModelNames, static_cast<int>(m));
}
const char* ToString(DataKind k) { return detail::NameOf(detail::kDataKinds, static_cast<int>(k)); }
const char* ToString(GpuDecode g) {
  return detail::NameOf(detail::kGpuDecodeNames, static_cast<int>(g));
}

bool IsImageModel(ModelName m) {
  switch (m) {
    case ModelName::kResnet18Cifar:
    case ModelName::kResnet50:
      return true;
    case ModelName::kBertTiny:
    case ModelName::kBertBase:
      return false;
  }
  return false;
}

}  // namespace ringpilot::config
