"""Buffer host actor: runs the buffer server (buffer/) in a thread and publishes its address."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from microcoder.buffer.config import BufferConfig
from microcoder.data.config import DataConfig
from microcoder.protocol import TrainingPrompt

if TYPE_CHECKING:
    from microcoder.buffer.prompts import MixturePrompts, PromptTable


def prompt_source(data: DataConfig, seed: int, table: PromptTable) -> MixturePrompts:
    """The buffer's prompt source: the table's sources mixed by `data.sources`' weights (one
    source for `data.source`), each walked epoch after epoch in the order of
    `data.order_seed(seed)` (`seed`: the run's global seed). A resumed run rebuilds it from its
    saved config.toml, so the same seed gives the same order and the snapshot's cursor fits."""
    from microcoder.buffer.prompts import MixturePrompts

    return MixturePrompts(
        table,
        [s.weight for s in data.source_list()],
        epochs=data.epochs,
        seed=data.order_seed(seed),
    )


def list_table(data: DataConfig, prompts: list[TrainingPrompt]) -> PromptTable:
    """A one-source table over a list of prompts, named after the run's one source."""
    from microcoder.buffer.prompts import ListPromptTable

    return ListPromptTable({data.source_list()[0].display_name(): [tuple(p) for p in prompts]})


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
            prompt_source(data, seed, list_table(data, prompts)),
            batch_size,
            keys_dir=keys_dir,
            restore_from=restore_from,
            snapshot_root=snapshot_root,
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
