// The test runner: every tests/test_*.cpp is linked into one doctest binary (build/tests).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
