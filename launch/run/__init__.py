"""One training run from bring-up to shutdown: the cluster handle, placement, the actor pools and
their supervision, scaling, the problems, the held-out evaluation during a run and the driver's
training loop. It may import launch/config.py, launch/run_dirs.py, launch/monitor/ and the rooms
below launch/ (actors/, learner/, data/, buffer/, sandbox/, evaluation/); never launch/cli/,
launch/compare/ or launch/jobs/.
"""
