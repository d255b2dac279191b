#!/usr/bin/env python3
"""Runs the Python package's pytest suite (ctest's python_package).

usage: run_tests.py PACKAGE_DIR SHARED_DIR README NNC

PACKAGE_DIR is build/python (empty when CMake did not build the package). Exits 77 (ctest's
skip) with a message when the package, numpy or pytest is missing.
"""
import os
import sys


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(77)


def main():
    package, shared, readme, nnc_binary = sys.argv[1:5]
    if not package:
        skip("the nnc Python package was not built (pybind11-dev or python3-dev missing: "
             "run scripts/setup.sh and build again)")
    for module, debian in (("numpy", "python3-numpy"), ("pytest", "python3-pytest")):
        try:
            __import__(module)
        except ImportError:
            skip(f"{module} is missing for {sys.executable} (Debian: {debian})")
    import pytest

    package = os.path.abspath(package)
    os.environ["PYTHONPATH"] = package + os.pathsep + os.environ.get("PYTHONPATH", "")
    sys.path.insert(0, package)
    os.environ["NNC_SHARED"] = shared
    os.environ["NNC_README"] = readme
    os.environ["NNC_BINARY"] = os.path.abspath(nnc_binary)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", here]))


if __name__ == "__main__":
    main()
