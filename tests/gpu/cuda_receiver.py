"""A weight-sync receiver on a CUDA device for tests/gpu, run as a script.

    python cuda_receiver.py HOST PORT DEVICE OUT

Joins as rank 1 of 2 on DEVICE (e.g. cuda:0), receives one round and writes it to OUT as
safetensors, with the version, the device the tensors arrived on and the backend in the metadata.
"""

from __future__ import annotations

import sys

from safetensors.torch import save_file

from microcoder.learner.sync.transport import WeightReceiver


def main() -> None:
    host, port, device, out = sys.argv[1:5]
    rx = WeightReceiver(host, int(port), 1, 2, timeout_s=120, name="gpu-receiver", device=device)
    version, tensors = rx.receive_all()
    arrived = {str(t.device) for t in tensors.values()}
    save_file(
        {k: v.cpu().contiguous() for k, v in tensors.items()},
        out,
        metadata={"version": str(version), "devices": ",".join(sorted(arrived))},
    )


if __name__ == "__main__":
    main()
