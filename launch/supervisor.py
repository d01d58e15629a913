"""The launcher's supervisor thread: every few seconds, restart dead replicas (returning their
leases to the buffer), log the errors live replicas report (a wave that failed on a bad prompt)
and apply `microcoder scale` requests.

It runs beside the training loop, never inside it: the loop may be blocked waiting for a batch
that only a restarted generator can produce, so supervision must not wait for a step to end.
"""

from __future__ import annotations

import threading

from microcoder.launch.cluster import Run


class Supervisor:
    def __init__(self, run: Run, period_s: float = 2.0, errors_every: int = 3):
        from microcoder.launch.control import ControlInbox

        self.run, self.period_s, self.errors_every = run, period_s, errors_every
        self._ticks = 0
        self.inbox = ControlInbox(run.run_dir)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="supervisor", daemon=True)

    def start(self) -> Supervisor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def tick(self) -> None:
        """One round: supervise both pools, then apply control requests."""
        from microcoder.launch.training_loop import apply_control

        run = self.run
        self._ticks += 1
        for pool in (run.generators, run.executors):
            hook = run.prepare_generator if pool is run.generators else None
            for event in pool.check(before_loop=hook):
                run.log(event)
                run.metrics.log("event", event=event, step=run.learners.version)
            if self._ticks % self.errors_every == 0:  # errors replicas survived (a failed wave)
                for error in pool.report_errors(pool.stats()):
                    run.log(error)
                    run.metrics.log("event", event=error, step=run.learners.version)
        apply_control(run, self.inbox)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.tick()
            except Exception as err:  # keep supervising; say what went wrong
                self.run.log(f"supervisor: {type(err).__name__}: {err}")
