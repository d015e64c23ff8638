"""Pure unit tests of the shared library: quantities, resource vectors and the admission core."""
