"""poolx.show_config(), python -m poolx, __version__, and the modules' repr."""

import subprocess
import sys

import torch
from torch import nn

import poolx


def test_show_config_names_what_runs(capsys):
    poolx.show_config()
    lines = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines())
    facts = {key.strip(): value.strip() for key, value in lines.items()}
    assert facts["poolx"] == poolx.__version__
    assert facts["torch"] == torch.__version__
    assert facts["CPU instruction set"] in ("default", "avx2", "avx512")
    assert facts["threads"] == str(torch.get_num_threads())
    cuda_built = facts["CUDA kernels"].startswith("yes")
    assert cuda_built or facts["CUDA kernels"].startswith("no (")
    if torch.version.cuda is None:
        assert not cuda_built
    assert facts["CUDA emulation build"] in ("yes", "no")


def test_python_m_poolx_prints_the_config():
    out = subprocess.run([sys.executable, "-m", "poolx"], capture_output=True, text=True,
                         check=True).stdout
    assert "poolx:" in out and poolx.__version__ in out and "CPU instruction set:" in out


def test_modules_name_poolx_in_their_repr():
    assert repr(poolx.MaxPool2d(2)) == "poolx." + repr(nn.MaxPool2d(2))
    assert repr(poolx.MaxUnpool2d(2, 2)) == "poolx." + repr(nn.MaxUnpool2d(2, 2))
    model = poolx.convert(nn.Sequential(nn.MaxPool2d(3, 2, 1)))
    assert repr(model) == "Sequential(\n  (0): poolx.MaxPool2d(kernel_size=3, stride=2, " \
        "padding=1, dilation=1, ceil_mode=False)\n)"
    assert model.state_dict().keys() == nn.Sequential(nn.MaxPool2d(3)).state_dict().keys()
