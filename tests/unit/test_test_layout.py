"""The test tree itself: pytest's default import mode needs unique test file basenames.

Two test files with one basename in different folders (and no ``__init__.py``)
make collection stop with "import file mismatch" on a clean checkout. This
test names the clash instead.
"""

import collections
import pathlib

TESTS = pathlib.Path(__file__).resolve().parents[1]


def test_test_file_basenames_are_unique():
    seen = collections.defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "__pycache__" in path.parts:
            continue
        seen[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert clashes == {}
