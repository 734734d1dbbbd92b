//===- TimingSamples.h - Best and median of timed calls ---------*- C++ -*-===//
//
// The seconds of repeated timed calls, summarised as the timing tools
// (tq-bench, tq-run) report them: the best call and the median (the upper
// one of an even count).
//
//===----------------------------------------------------------------------===//

#ifndef TQ_TOOLS_SUPPORT_TIMINGSAMPLES_H
#define TQ_TOOLS_SUPPORT_TIMINGSAMPLES_H

#include <algorithm>
#include <vector>

namespace tq::tools {

class TimingSamples {
public:
  void add(double seconds) { samples_.push_back(seconds); }
  /// Both need at least one sample.
  double best() const {
    return *std::min_element(samples_.begin(), samples_.end());
  }
  double median() const {
    std::vector<double> s = samples_;
    std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
    return s[s.size() / 2];
  }

private:
  std::vector<double> samples_;
};

} // namespace tq::tools

#endif // TQ_TOOLS_SUPPORT_TIMINGSAMPLES_H
