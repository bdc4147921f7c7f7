"""python -m mmops.mmcv_ops SCRIPT [ARGS...]: runs SCRIPT as __main__ with the
mmcv.ops bridge enabled (for tools such as mmdet's tools/train.py)."""

import runpy
import sys

import mmops.mmcv_ops  # noqa: F401  (installs the bridge)


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m mmops.mmcv_ops SCRIPT [ARGS...]  (or -m MODULE [ARGS...])")
    if sys.argv[1] == "-m" and len(sys.argv) > 2:
        sys.argv = sys.argv[2:]
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = sys.argv[1:]
        runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
