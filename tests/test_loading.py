"""What a user sees when the compiled library cannot be loaded."""

import subprocess
import sys


def test_missing_compiled_library_says_how_to_build():
    # None in sys.modules makes `from poolx import _C` fail as a missing module does.
    code = "import sys; sys.modules['poolx._C'] = None; import poolx"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "ImportError: poolx's compiled library poolx._C could not be loaded" in result.stderr
    assert "pip install --no-build-isolation -e ." in result.stderr
