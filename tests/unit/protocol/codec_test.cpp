// Placeholder until written.
#include <doctest/doctest.h>
