"""Helpers the tests and the benchmark scripts share (the scripts import them by the checkout's path)."""
