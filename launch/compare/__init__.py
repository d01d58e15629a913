"""`microcoder compare`: the arms (registered once), the arm x seed grid checked before anything
runs, the runner that launches each run as a child `microcoder launch`, the per-step metrics it
records, and the report and plots it writes. It may import launch/config.py, launch/monitor/,
launch/run/'s planning (to check every arm's placement before anything runs) and the rooms below
launch/; never actors/ or launch/jobs/ (each run is a child process).
"""
