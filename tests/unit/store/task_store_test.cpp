// Placeholder until the module lands.
#include <doctest/doctest.h>
