"""Buffer host actor: runs the buffer server (buffer/) in a thread and publishes its address."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from microcoder.actors.logs import redirect_to_run_dir
from microcoder.actors.memory import measure
from microcoder.buffer.config import BufferConfig
from microcoder.data.config import DataConfig
from microcoder.protocol import ActorMemory

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


def open_prompt_table(prompts: Any, data: DataConfig) -> PromptTable:
    """The PromptTable (buffer/prompts.py) a buffer host serves from `prompts`: a
    data/store.py StoreTableSpec (a run: the table is opened from the run's problem store by
    path, so no Ray argument carries the dataset), a PromptTable, or a list of (problem_id,
    prompt text) pairs (tests and benchmarks: one source, named after the run's first)."""
    from microcoder.buffer.prompts import ListPromptTable
    from microcoder.data.store import StoreTableSpec

    if isinstance(prompts, StoreTableSpec):
        return prompts.open()
    if hasattr(prompts, "item") and hasattr(prompts, "count"):
        return prompts
    name = data.source_list()[0].display_name()
    return ListPromptTable({name: [(str(p[0]), str(p[1])) for p in prompts]})


class BufferHost:
    """Ray actor body. `prompts`: the training prompts, (problem_id, rendered prompt text) per
    row, rendered and measured by the launcher (launch/run/problems.py): a data/store.py
    StoreTableSpec naming the run's problem store, which the host opens itself, or for tests a
    list of pairs or a PromptTable (`open_prompt_table`).
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
        prompts: Any,
        restore_from: str | None = None,
        keys_dir: str | None = None,
        snapshot_root: str | None = None,
        seed: int = 0,
    ):
        from microcoder.buffer.server import BufferServer, dedicate_process

        redirect_to_run_dir("buffer")
        import ray  # "auto": bind and publish the IP of this node as Ray reports it

        buffer = buffer.model_copy(
            update={"host": buffer.bind_host(ray.util.get_node_ip_address())}
        )
        self.server = BufferServer(
            buffer,
            prompt_source(data, seed, open_prompt_table(prompts, data)),
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

    def memory(self) -> ActorMemory:
        """The buffer host's memory: RSS of its process, where the buffer server runs."""
        return measure("buffer", "buffer")

    def stats(self) -> dict[str, Any]:
        from microcoder.buffer.client import BufferClient

        with BufferClient(self.address, owner="buffer-host") as c:
            return c.stats()

    def shutdown(self) -> None:
        self.server.stop()
