"""The generator's and learner rank 0's halves of a weight update, and nothing else.

Rank 0's half: `WeightPublisher` (publisher.py: the newest weights and one channel per
generator), the relay's hub (relay_hub.py: one chain per version for all generators) and
`WorkLock` (work_lock.py: sends over NCCL and the learner's collectives take turns). The
generator's half: `WeightFollower` (follower.py: when to poll, pull, hold and release), which
talks to one `WeightSource` (source.py) and never knows whether a round came by channel
(channel_source.py over pull.py) or by relay (relay_source.py over relay_member.py). The transports themselves live in learner/sync/.

It may import actors/config.py, actors/deadline.py, actors/generate_loop.py's `caused_by`, learner/ and
microcoder/; never launch/ or the actors that hold it (generator, executor, learner_rank).
"""
