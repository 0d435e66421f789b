#!/bin/sh
# `make bench`: the benchmark (tests/bench/run.py --help). Extra arguments pass through, e.g. --quick.
cd "$(dirname "$0")/../.." || exit 1
exec "${PYTHON:-.venv/bin/python}" tests/bench/run.py "$@"
