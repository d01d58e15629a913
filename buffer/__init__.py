"""The ZeroMQ + msgpack replay buffer: wire codecs, server, client, staleness gate, accounting. No torch.

Import from the submodules (this file imports nothing, so config loading stays light):

    from microcoder.buffer.server import BufferServer
    from microcoder.buffer.client import BufferClient, BufferError, BufferTimeout
    from microcoder.buffer.prompts import DatasetPrompts
    from microcoder.protocol import Group, Response, GroupScores, Score, ScoredGroup

Server (hosted by the buffer actor)::

    server = BufferServer(cfg.buffer, DatasetPrompts(problems, epochs, seed), cfg.learner.batch_size,
                          keys_dir=None, restore_from=None)
    address = server.start()        # background thread; server.stop() to end

Clients (one per actor and thread; `owner` is the name its leases are held under)::

    c = BufferClient.from_config(cfg.buffer, address, owner="generator-3")   # or BufferClient(...)

    # generator
    reply = c.get_prompts(n, wait_s=1.0)  # .assignments: [PromptAssignment], .done: source exhausted
    c.put_unscored([Group(a.group_id, a.problem_id, a.prompt, prompt_ids, responses), ...])
    c.fail_group(group_id, "prompt too long")       # give up on a prompt for good (counted failed)
    # executor
    groups = c.get_unscored(n, wait_s=1.0)           # [Group] with text, no token arrays (tokens=True adds them)
    c.put_scored([GroupScores(g.group_id, [Score(reward, verdict, ...) per response]), ...])
    c.fail_group(group_id, "sandbox error")          # counted failed
    # learner
    batch = c.get_batch(batch_size, version, timeout_s=None)  # blocks; .groups: [ScoredGroup] (no text unless text=True)
    c.report_filtered([gid, ...])   # dynamic filtering: delivered groups it will not train on
    c.announce_version(version + 1)                   # after each optimizer step
    # launcher / supervisor
    c.stats(); c.snapshot(path); c.restore(path)
    c.release("generator-3")   # that actor died: its prompts are re-queued, its groups re-offered

Leases: every prompt handed out and every group handed to an executor is leased to the owner
that took it. A put or fail for a group you do not hold is rejected (PutReply.rejected says
why). `release(owner)` returns all of an owner's leases at once (the launcher calls it when an
actor dies or restarts under the same name); leases held longer than buffer.lease_timeout_s are
returned automatically. A returned prompt is counted `failed` (reason lease_released or
lease_expired) and issued again as a new group id, so `issued = consumed + dropped_stale + failed
+ in_flight` stays exact. A returned group goes back to the front of the unscored queue.

Staleness is decided only by `staleness.within_bound`; admission control only by
`staleness.admission_capacity`, which counts groups consumed INTO TRAINING: a group the learner
drops by dynamic filtering (DAPO: all rewards equal, fetch more) is still `consumed` (and
`filtered`) in the accounting, but gives its admission capacity back, because the learner's
version only moves once it has trained on a full batch. Otherwise a weak model whose groups are
all filtered would shrink the capacity to zero while the version stands still: deadlock. The
learner names those groups with `report_filtered`; the ids ride on its next get_batch and are
applied before it waits (so the capacity is free exactly when it is needed); each id counts
once (resends are harmless), and only ids of groups recently delivered count. Stale groups are dropped as soon as the learner's version makes
them unusable, counted, and logged with a remedy. Puts beyond buffer.high_water_groups are
answered `full` and retried by the client with backoff. The types (messages, leases, groups,
scores) are microcoder/protocol.py's; their wire format: buffer/wire.py and buffer/records.py
(messages) and buffer/codec.py (Group and GroupScores, and which parts each consumer receives).
The rule, admission control and the buffer's place in the system: docs/architecture.md §4 and
§6.
"""
