// Codes both kernel families share with Python: policies (ftcompile.config.POLICIES order) and the
// fields of a site's telemetry row (ftcompile.telemetry.FIELDS order).
#pragma once
#include <stdint.h>

namespace sm90 {

enum Policy : int32_t { kCorrect = 0, kDetect = 1, kRaise = 2, kRecompute = 3 };
enum Field : int32_t { kChecks = 0, kDetected = 1, kCorrected = 2, kUncorrectable = 3, kNonfinite = 4 };

}  // namespace sm90
