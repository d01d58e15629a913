"""What a run shows: the metrics log (metrics.jsonl) and its sinks (TensorBoard, W&B, Prometheus),
the live dashboard (server, store, the static page in dashboard_static/), `status` and the
end-of-run summary. It may import launch/config.py, launch/run_dirs.py and the rooms below
launch/; never launch/run/, launch/cli/, launch/compare/ or launch/jobs/ (the run hands it what
it shows).
"""
