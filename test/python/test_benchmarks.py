"""The benchmark scripts' shared options and outputs, on the CPU: every
benchmarks/bench_*.py runs one small case with --quick --json --csv (one
iteration: a smoke run, timings not looked at; in this process, to import torch
once), the records have the fields plot.py and readers rely on, and plot.py
turns them into a PNG. benchmarks/run.sh runs one script as a user would."""

import contextlib
import csv
import io
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HAS_TORCHVISION, requires_torchvision

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"

# script -> the options of its smallest run (one case, one iteration)
SMALL_RUNS = {
    "bbox_overlaps": ["--cases", "proposals"],
    "carafe": ["--cases", "fpn_25x38", "--layouts", "contiguous", "--distributions", "flat"],
    "convex_iou": ["--cases", "convex_iou_2000", "--distributions", "clustered"],
    "deform_conv": ["--cases", "1x32x40x48", "--layouts", "contiguous"],
    "deform_roi_pool": ["--cases", "p2_512_uniform", "--offsets", "offset"],
    "focal_loss": ["--cases", "softmax_focal_loss"],
    "masked_conv": ["--cases", "ga_p4_small", "--densities", "5%"],
    "ms_deform_attn": ["--cases", "encoder"],
    "nms": ["--cases", "nms", "--sizes", "300"],
    "nms_match": ["--cases", "uniform", "--sizes", "300"],
    "roi_align": ["--cases", "box", "--layouts", "contiguous"],
    "roi_pool": ["--layouts", "contiguous"],
    # --- box_iou_rotated / nms_rotated ---
    "box_iou_rotated": ["--cases", "clustered_100"],
    "nms_rotated": ["--cases", "clustered", "--sizes", "200"],
    # --- rotated_feature_align, active_rotated_filter ---
    "rotated_feature_align": ["--cases", "s64", "--distributions", "clustered", "--points", "5"],
    "active_rotated_filter": ["--cases", "16x16", "--tables", "orn"],
    "roi_align_rotated": ["--cases", "rotated_uniform", "--layouts", "contiguous", "--ratios", "2"],
    # --- diff_iou_rotated ---
    "diff_iou_rotated": ["--cases", "diff_iou_rotated_2d", "--distributions", "overlap"],
    # --- voxelization ---
    "voxelization": ["--distributions", "lidar", "--points", "3000", "--clouds", "2"],
    # --- assign_score_withk, chamfer_distance ---
    "assign_score_withk": ["--cases", "small", "--distributions", "knn"],
    "chamfer_distance": ["--cases", "b2_256", "--distributions", "clustered"],
    # --- neighbors (ball_query, knn, three_nn, three_interpolate) ---
    "neighbors": ["--cases", "three_interpolate_fp", "--distributions", "scene"],
    # --- furthest_point_sample, group_points ---
    "furthest_point_sample": ["--cases", "cpu_2x2048_256", "--distributions", "uniform"],
    "group_points": ["--cases", "cpu_2x1024_c16_256x16", "--distributions", "ball"],
    # --- iou3d ---
    "iou3d": ["--cases", "boxes_iou_bev_clustered,boxes_overlap_bev_uniform,nms_bev_clustered", "--sizes", "100"],
    # --- points_in_boxes, roiaware_pool3d, roipoint_pool3d ---
    "box3d": ["--cases", "roiaware_pool3d_max", "--distributions", "objects"],
    # --- psa_mask ---
    "psa_mask": ["--cases", "local9_24", "--types", "collect"],
    # --- cc_attention ---
    "cc_attention": ["--cases", "small_24"],
    # --- contour_expand, pixel_group ---
    "text_grouping": ["--cases", "pixel_group", "--sizes", "160", "--instances", "10"],
    # --- border_align ---
    "border_align": ["--cases", "small", "--boxes", "detector"],
    # --- bezier_align ---
    "bezier_align": ["--cases", "small", "--rois", "text"],
    # --- prroi_pool ---
    "prroi_pool": ["--rois", "proposals"],
    # --- ps_roi ---
    "ps_roi": ["--cases", "small", "--rois", "proposals,large"],
    # --- tin_shift ---
    "tin_shift": ["--cases", "cpu_c64_14", "--shifts", "tin"],
    # --- correlation ---
    "correlation": ["--cases", "cpu_pwc", "--layouts", "contiguous"],
    # --- corner_pool ---
    "corner_pool": ["--cases", "cpu_64", "--modes", "left", "--distributions", "relu", "--layouts", "contiguous"],
    # --- upfirdn2d ---
    "upfirdn2d": ["--cases", "cpu_up2_32", "--kernels", "binomial"],
    # --- fused_bias_leakyrelu ---
    "fused_bias_leakyrelu": ["--cases", "cpu_64x32"],
    # --- bias_act ---
    "bias_act": ["--cases", "cpu_64x32_clamp", "--acts", "lrelu"],
    # --- filtered_lrelu ---
    "filtered_lrelu": ["--cases", "cpu_crit_32x24", "--filters", "sinc"],
}
FIELDS = {"benchmark", "device", "op", "dtype", "case", "baseline", "times_ms", "ratios", "check"}


def test_every_benchmark_is_listed():
    scripts = {p.stem.removeprefix("bench_") for p in BENCH.glob("bench_*.py")} - {"common"}
    assert scripts == set(SMALL_RUNS)


def run_benchmark(name, tmp_path):
    """Runs bench_<name>.py as __main__ in this process: (exit code, stdout, stderr, json, csv path)."""
    out_json, out_csv = tmp_path / f"{name}.json", tmp_path / f"{name}.csv"
    script = BENCH / f"bench_{name}.py"
    argv = [str(script), "--device", "cpu", "--quick", "--iters", "1", "--warmup", "0"]
    argv += ["--json", str(out_json), "--csv", str(out_csv), *SMALL_RUNS[name]]
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    saved = sys.argv, list(sys.path)
    sys.argv, sys.path[:0] = argv, [str(BENCH)]
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv, sys.path[:] = saved
    assert code == 0, f"{' '.join(argv)}\n{stdout.getvalue()}\n{stderr.getvalue()}"
    return stdout.getvalue(), stderr.getvalue(), json.loads(out_json.read_text()), out_csv


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """name -> (stdout, stderr, json, csv path) of every script's small run."""
    tmp = tmp_path_factory.mktemp("bench")
    return {name: run_benchmark(name, tmp) for name in SMALL_RUNS}


@pytest.mark.parametrize("name", sorted(SMALL_RUNS))
def test_benchmark_writes_records(results, name):
    stdout, stderr, data, csv_path = results[name]
    rows = data["rows"]
    assert rows, stdout
    assert data["meta"]["device"].startswith("cpu") and data["meta"]["iters"] == 1
    for row in rows:
        assert FIELDS <= set(row), row
        assert row["benchmark"] == name and row["device"].startswith("cpu")
        assert row["times_ms"]["mmops fwd"] > 0, row
        for key, value in row["ratios"].items():
            assert key.split()[-1] in ("fwd", "fwd+bwd"), key
            assert value is None or value > 0, row
        assert "ERROR" not in row["check"] and "DIFFERS" not in row["check"], row
    # a progress line per row on stderr, the table on stdout
    progress = [line for line in stderr.splitlines() if line.startswith("[")]
    assert len(progress) == len(rows), stderr
    assert "mmops" in stdout and "ratio" in stdout
    with open(csv_path, newline="") as f:
        lines = list(csv.DictReader(f))
    assert len(lines) == len(rows)
    assert {"op", "dtype", "check", "mmops fwd ms"} <= set(lines[0])
    assert float(lines[0]["mmops fwd ms"]) > 0


@requires_torchvision
def test_ratio_is_baseline_over_mmops(results):
    row = results["roi_align"][2]["rows"][0]
    t = row["times_ms"]
    assert row["ratios"]["torchvision fwd"] == pytest.approx(t["torchvision fwd"] / t["mmops fwd"])


def test_plot_draws_every_op(results, tmp_path):
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(BENCH))
    try:
        import plot
    finally:
        sys.path.remove(str(BENCH))
    files = sorted({str(Path(v[3]).with_suffix(".json")) for v in results.values()})
    out = tmp_path / "speedups.png"
    assert plot.main([*files, "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    drawn = plot.by_op(plot.load_rows(files))
    assert {"bbox_overlaps", "nms_match"} | ({"roi_align", "nms"} if HAS_TORCHVISION else set()) <= set(drawn)


def test_plot_rejects_other_json(tmp_path):
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(BENCH))
    try:
        import plot
    finally:
        sys.path.remove(str(BENCH))
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    with pytest.raises(SystemExit, match="not a benchmark"):
        plot.main([str(bad), "-o", str(tmp_path / "x.png")])


def test_run_sh_runs_a_benchmark_with_the_given_python(tmp_path):
    """benchmarks/run.sh: the python of MMOPS_PYTHON, the library of MMOPS_LIBRARY, from any directory."""
    if "MMOPS_LIBRARY" not in os.environ:
        pytest.skip("needs MMOPS_LIBRARY (ctest sets it)")
    env = dict(os.environ, MMOPS_PYTHON=sys.executable)
    out = tmp_path / "nms.json"
    cmd = [str(BENCH / "run.sh"), "nms", "--device", "cpu", "--quick", "--sizes", "50", "--dists", "sparse"]
    cmd += ["--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [r["op"] for r in json.loads(out.read_text())["rows"]] == ["nms", "batched_nms"]
