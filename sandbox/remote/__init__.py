"""The `http` judge backend: the client the executor uses (client.py) and the service `microcoder
judge serve` runs (server.py), speaking a small JSON protocol (docs/architecture.md). The server
judges with the local pool; the client reuses only the pool's JudgeChannel and its kind
check (it starts no worker).
"""
