"""Environments: what a trajectory is. An environment turns a problem into the first turn's chat
messages (`reset`) and answers each model turn (`step`): done, or feedback messages for the next
turn. `single` (one turn, today's behaviour), `repair` (the program runs on the visible tests and
the model repairs it from the feedback) and a user's `module:Class`, registered once in base.py.
Their sandbox calls run in the executor pool (`EnvSandbox`). The generator (actors/generator.py)
drives them; the protocol types (`EnvStep`, `ProgramRun`, `Turn`) live in microcoder/protocol.py.
May import microcoder.data and microcoder.sandbox (extraction, verdicts); never the generator,
executor or learner actors, launch/ or learner/."""
