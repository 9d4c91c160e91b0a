# tests/test_litmus.c: one litmus-style test per lock-free protocol (slot
# reuse, wide sums, engine-step ring, clock seqlock). Label `litmus`
# (ctest -L litmus) so that the emulated aarch64 run and TSan can pick them.
foreach(kind shared static)
  set_tests_properties(${TTFT_CTESTS_test_litmus_${kind}} PROPERTIES
                       LABELS "unit;${kind};test_litmus;litmus" TIMEOUT 300)
endforeach()
