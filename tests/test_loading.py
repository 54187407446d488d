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


def test_errors_raised_in_the_extension_reach_python():
    # A library built with a C++ compiler whose runtime differs from the one
    # torch loads can die here instead (seen with a GCC under /opt/gcc on a
    # GPU machine: a segfault at every error the extension raised).
    code = (
        "import torch, poolx\n"
        "try:\n"
        "    torch.ops.poolx.max_pool2d_values(torch.ones(1, 1, 4, 4), [0, 0], [1, 1], [0, 0],"
        " [1, 1], False)\n"
        "except RuntimeError as e:\n"
        "    print('raised:', e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, (
        f"the error killed the process (exit {result.returncode}): rebuild poolx with the "
        f"C++ compiler torch was built with\n{result.stderr[-2000:]}"
    )
    assert "raised: kernel size should be greater than zero" in result.stdout, result.stdout
