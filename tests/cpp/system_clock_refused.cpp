// system_clock_refused.cpp — must NOT compile: a std::chrono::system_clock
// time point (a wall-clock time) given where ttft::Time expects the
// library's monotonic clock (issue 32.7). tests/cpp.cmake passes when the
// compiler's error carries ttft.hpp's message naming the clock.
#include <ttft.hpp>

#include <chrono>

int main() {
  ttft::Registry reg;
  ttft::Stream s = reg.begin(std::chrono::system_clock::now());
  return s ? 0 : 1;
}
