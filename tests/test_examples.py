"""Every example runs end to end on small sizes and reports what it should."""

import pathlib
import runpy

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def example_main(name):
    return runpy.run_path(str(EXAMPLES / f"{name}.py"))["main"]


def test_custom_training(capsys):
    result = example_main("custom_training")(["--small", "--min-run-time", "0.01"])
    check = result["check"]
    assert check["pooled_equal"] and check["grad_pre_equal"] and check["grad_weight_close"]
    assert check["mask_true"] == check["windows"] == 64 * 2 * 8 * 8
    for pass_times in result["times"].values():
        assert set(pass_times) == {"avg_pool2d", "poolx with argmax", "torch with indices"}
        assert all(t > 0 for t in pass_times.values())
    out = capsys.readouterr().out
    assert "bit-identical" in out and "| forward |" in out and "| backward |" in out


def test_convert_model(capsys):
    results = example_main("convert_model")(["--small"])
    assert set(results) == {"vgg", "unet", "patch"}
    for theirs, ours in results.values():
        assert len(ours) == 3 and ours == theirs
    assert "identical losses for every model" in capsys.readouterr().out


def test_memory(capsys):
    results = example_main("memory")(["--small", "--batch", "1"])
    (torch_total, torch_pool, _), (argmax_total, argmax_pool, _), (re_total, re_pool, _) = (
        results.values()
    )
    # 2x2 pools of a 64x64 input at channels / 16: the pooled elements of all five.
    pooled = sum(4 * 2**k * (32 >> k) ** 2 for k in range(4)) + 32 * 2 * 2
    assert torch_pool == 8 * pooled and argmax_pool == pooled and re_pool == 0
    assert torch_total - argmax_total == 7 * pooled and argmax_total - re_total == pooled
    assert "| poolx save=\"recompute\" |" in capsys.readouterr().out


def test_memory_of_a_3d_unet(capsys):
    results = example_main("memory")(["--unet3d", "--size", "16", "--width-divisor", "8"])
    (torch_total, torch_pool, _), (argmax_total, argmax_pool, _), (re_total, re_pool, _) = (
        results.values()
    )
    # three 2x2x2 pools of 16^3, 8^3 and 4^3 volumes of 4, 8 and 16 channels
    pooled = 4 * 8**3 + 8 * 4**3 + 16 * 2**3
    assert torch_pool == 8 * pooled and argmax_pool == pooled and re_pool == 0
    assert torch_total - argmax_total == 7 * pooled and argmax_total - re_total == pooled

