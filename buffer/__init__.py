"""The ZeroMQ + msgpack replay buffer: messages, server, client, staleness gate, accounting. No torch."""
