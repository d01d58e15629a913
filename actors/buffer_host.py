"""Buffer host actor: runs the buffer server (buffer/) in a thread and publishes its address."""

from __future__ import annotations

from typing import Any

from microcoder.buffer.config import BufferConfig
from microcoder.data.config import DataConfig
from microcoder.protocol import TrainingPrompt


def prompt_source(data: DataConfig, seed: int, prompts: list[TrainingPrompt]):
    """The buffer's prompt source: `prompts` epoch after epoch, each epoch in the order of
    `data.order_seed(seed)` (`seed`: the run's global seed). A resumed run rebuilds it from its
    saved config.toml, so the same seed gives the same order and the snapshot's cursor fits."""
    from microcoder.buffer.prompts import DatasetPrompts

    return DatasetPrompts(
        [tuple(p) for p in prompts], epochs=data.epochs, seed=data.order_seed(seed)
    )


class BufferHost:
    """Ray actor body. `prompts`: (problem_id, rendered prompt text) of the training problems
    (rendered and measured by the launcher, launch/run/problems.py); the server holds only those.
    `data` and `seed` (the run's global seed) give their order (`prompt_source`); `batch_size`
    is the learner's
    (`learner.batch_size`, admission control). `keys_dir`: the run's CurveZMQ keys (the
    published address names the folder, so every client finds them); `snapshot_root`: the run
    directory, the only place Snapshot/Restore requests may name."""

    def __init__(
        self,
        buffer: BufferConfig,
        data: DataConfig,
        batch_size: int,
        prompts: list[TrainingPrompt],
        restore_from: str | None = None,
        keys_dir: str | None = None,
        snapshot_root: str | None = None,
        seed: int = 0,
    ):
        from microcoder.actors.logs import redirect_to_run_dir
        from microcoder.buffer.server import BufferServer, dedicate_process

        redirect_to_run_dir("buffer")
        import ray  # "auto": bind and publish the IP of this node as Ray reports it

        buffer = buffer.model_copy(
            update={"host": buffer.bind_host(ray.util.get_node_ip_address())}
        )
        self.server = BufferServer(
            buffer,
            prompt_source(data, seed, prompts),
            batch_size,
            keys_dir=keys_dir,
            restore_from=restore_from,
            snapshot_root=snapshot_root,
            retire_solved_after=data.retire_solved_after,
            skip_unsolved_after=data.skip_unsolved_after,
        )
        dedicate_process()  # this actor's process exists to serve the buffer
        self.address = self.server.start()

    def get_address(self) -> str:
        return self.address

    def stats(self) -> dict[str, Any]:
        from microcoder.buffer.client import BufferClient

        with BufferClient(self.address, owner="buffer-host") as c:
            return c.stats()

    def shutdown(self) -> None:
        self.server.stop()
