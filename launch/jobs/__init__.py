"""Work that uses a cluster outside a training run: `microcoder eval` (its inputs, its actors, its
body) and `microcoder data filter` (measure pass rates through the eval path, then select). It
may import launch/config.py, launch/cliargs.py, launch/run/ (to place actors) and the rooms
below launch/; never launch/cli/ or launch/compare/.
"""
