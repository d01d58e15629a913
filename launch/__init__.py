"""The `microcoder` CLI, config loading, cluster bring-up, supervision, scaling and the dashboard."""
