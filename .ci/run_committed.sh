#!/usr/bin/env bash
# For the GPU machine (the `device` tool), when the working tree holds work that is
# not ready (e.g. helpers' files): runs .ci/gpu_check.sh on the COMMITTED tree.
# Here:   git archive HEAD -o .device/src.tar
# Device: bash .ci/run_committed.sh cuda bench sanitize     (with carry: [".device"])
# The archive is unpacked into /tmp/ms; the build goes to the repo copy's build-gpu,
# which a warm machine keeps between calls.
set -u
R=$PWD
rm -rf /tmp/ms && mkdir /tmp/ms && tar -xf .device/src.tar -C /tmp/ms && cd /tmp/ms || exit 1
export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ MMOPS_BUILD_DIR=$R/build-gpu
.ci/gpu_check.sh "$@"
