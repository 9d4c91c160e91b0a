# tests/test_litmus.c: one litmus-style test per lock-free protocol (slot
# reuse, wide sums, engine-step ring, clock seqlock). Label `litmus`
# (ctest -L litmus: the emulated aarch64 run), and `concurrent`, which
# .ci/steps.d/20-sanitizers.sh builds and runs under TSan (~15 s there).
foreach(kind shared static)
  set_tests_properties(${TTFT_CTESTS_test_litmus_${kind}} PROPERTIES
                       LABELS "unit;${kind};test_litmus;litmus;concurrent" TIMEOUT 300)
endforeach()
