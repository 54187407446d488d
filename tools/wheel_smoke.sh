#!/usr/bin/env bash
# Builds a poolx wheel against the torch installed here, installs it into a fresh
# virtual environment that sees this same torch (and nothing of this checkout),
# and runs a smoke test there: import, show_config(), one pooling with backward
# against torch's.
#
#   tools/wheel_smoke.sh            (the wheel is left in dist/)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d -t poolx-wheel.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cd "$repo"
rm -f dist/poolx-*.whl
pip wheel --no-build-isolation --no-deps -w dist . >"$work/wheel.log" 2>&1 ||
  { tail -30 "$work/wheel.log"; exit 1; }
wheel="$(ls dist/poolx-*.whl)"
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1))"
# --system-site-packages: the same torch and numpy, without downloading them again.
# The wheel goes into the venv's own site-packages, which comes first on sys.path.
python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install -q --no-deps --force-reinstall "$wheel"
cd "$work"   # away from the checkout, so its poolx/ cannot be imported
"$work/venv/bin/python" - "$work/venv" <<'PY'
import os, sys
import torch
import torch.nn.functional as F
import poolx

venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(poolx.__file__)
assert where.startswith(venv), f"imported poolx from {where}, not from the wheel in {venv}"
poolx.show_config()
x = torch.randn(2, 3, 9, 11, requires_grad=True)
x_ref = x.detach().clone().requires_grad_()
y = poolx.max_pool2d(x, 3, stride=2, padding=1)
y_ref = F.max_pool2d(x_ref, 3, stride=2, padding=1)
grad = torch.randn_like(y)
y.backward(grad)
y_ref.backward(grad)
torch.testing.assert_close(y, y_ref, rtol=0, atol=0)
torch.testing.assert_close(x.grad, x_ref.grad, rtol=0, atol=0)
print("wheel smoke test: passed")
PY
